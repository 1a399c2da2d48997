//go:build linux

package sandbox

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// maxWalkDepth bounds how deep diskUsage descends (executors may be given a
// smaller bound, for tests). It holds one directory descriptor per level, so
// the bound keeps it well inside RLIMIT_NOFILE; a deeper tree is an error,
// which the callers treat as over the limit. It is far beyond PATH_MAX:
// 2,049 levels of one-character names already do not fit.
const maxWalkDepth = 4096

// errTooManyEntries is returned by diskUsage when the tree has more entries
// than it was asked to count.
var errTooManyEntries = errors.New("too many files and directories")

// errTooDeep is returned by diskUsage for a tree deeper than its bound (the
// value).
type errTooDeep int

func (e errTooDeep) Error() string {
	return fmt.Sprintf("the directory tree is deeper than %d levels", int(e))
}

// usageError describes an error of diskUsage without the host paths that
// os errors carry (the text goes to the sandboxed code).
func usageError(err error) string {
	var errno syscall.Errno
	var deep errTooDeep
	switch {
	case errors.As(err, &deep), errors.Is(err, errTooManyEntries):
		return err.Error()
	case errors.As(err, &errno):
		return errno.Error()
	}
	return "an error"
}

// usage is what diskUsage measured.
type usage struct {
	bytes   int64  // allocated blocks (st_blocks * 512) of every entry, directories included
	entries int64  // files, directories, symlinks and special files, the top directory excluded
	dev     uint64 // the device of the measured directory (0 when unknown)
}

// diskUsage measures dir like du: the blocks allocated to every entry under
// it (so sparse files and fallocate(FALLOC_FL_KEEP_SIZE) reservations count
// what they really take, and directories count too) and the number of entries
// (inodes; hard links count once per name). It walks with directory file
// descriptors (os.Root: openat/fstatat relative to the parent), never with
// full paths, so a
// tree deeper than PATH_MAX is measured as well, and it never follows
// symlinks. It stops with errTooManyEntries past maxEntries entries (when
// maxEntries > 0); any other failure (a directory it cannot open, a tree
// deeper than maxWalkDepth, a descriptor shortage) is an error too: callers
// must treat an error as over the limit.
func diskUsage(dir string, maxEntries int64) (usage, error) {
	return diskUsageOwned(dir, maxEntries, maxWalkDepth, nil)
}

// diskUsageOwned is diskUsage that also gives every entry not owned by owner
// to it (without following symlinks, relative to its directory's
// descriptor; never a file with more than one link, which may have a name
// outside the directory): files the emulator wrote as root (uploads) become
// the sandbox user's. A nil owner changes nothing. maxDepth bounds the walk
// (maxWalkDepth for diskUsage).
func diskUsageOwned(dir string, maxEntries int64, maxDepth int, owner *hostID) (usage, error) {
	fi, err := os.Lstat(dir)
	if err != nil {
		return usage{}, err
	}
	if !fi.IsDir() {
		return usage{}, fmt.Errorf("%s is not a directory", dir)
	}
	r, err := os.OpenRoot(dir)
	if err != nil {
		return usage{}, err
	}
	u := usage{bytes: blocks(fi)}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		u.dev = uint64(st.Dev)
	}
	w := walk{maxEntries: maxEntries, maxDepth: maxDepth, owner: owner, u: &u}
	err = w.dir(r, 1)
	return u, err
}

// blocks is the allocated size of fi in bytes.
func blocks(fi os.FileInfo) int64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return st.Blocks * 512
	}
	return fi.Size()
}

// walk is one diskUsageOwned walk: its bounds, the owner to give entries
// to, and the usage so far.
type walk struct {
	maxEntries int64
	maxDepth   int
	owner      *hostID
	u          *usage
}

// dir adds the entries under r, which it closes. Entries are read in
// batches and stat-ed relative to the directory's descriptor (os.Root does
// fstatat); subdirectories are visited after the directory is closed, so a
// level holds one descriptor (its Root) while deeper levels are walked.
func (w *walk) dir(r *os.Root, depth int) error {
	defer r.Close()
	maxEntries, owner, u := w.maxEntries, w.owner, w.u
	if depth > w.maxDepth {
		return errTooDeep(w.maxDepth)
	}
	f, err := r.Open(".")
	if err != nil {
		if depth > 1 && errors.Is(err, fs.ErrNotExist) {
			return nil // removed since it was opened: see below
		}
		return err
	}
	var subdirs []subdir
	for {
		ents, err := f.ReadDir(512)
		if depth > 1 && errors.Is(err, fs.ErrNotExist) {
			// A directory removed since the walk opened it (code in the
			// session making and removing directories) reads as ENOENT; it
			// is empty (rmdir and rename take only empty ones), so it adds
			// nothing. Counting it as unmeasurable killed the kernel as
			// over the limit (red team, TestDiskUsageDirectoryRemovedMidWalk).
			// The top directory itself still fails closed.
			err = io.EOF
		}
		for _, ent := range ents {
			fi, ierr := ent.Info()
			if ierr != nil {
				if errors.Is(ierr, fs.ErrNotExist) {
					continue // removed meanwhile
				}
				f.Close()
				return ierr
			}
			u.entries++
			u.bytes += blocks(fi)
			if owner != nil {
				// Never an inode with another name: a hard link made in the
				// data directory to a file elsewhere on its file system (by a
				// host process running as the sandbox user: -sandbox none's
				// code as root, red team) would give that file, e.g.
				// /etc/shadow where fs.protected_hardlinks is 0, to the
				// sandbox user. What the emulator writes there has one link.
				if st, ok := fi.Sys().(*syscall.Stat_t); ok && (int(st.Uid) != owner.uid || int(st.Gid) != owner.gid) && (fi.IsDir() || st.Nlink == 1) {
					if err := r.Lchown(ent.Name(), owner.uid, owner.gid); err != nil && !errors.Is(err, fs.ErrNotExist) {
						f.Close()
						return err
					}
				}
			}
			if maxEntries > 0 && u.entries > maxEntries {
				f.Close()
				return errTooManyEntries
			}
			if fi.IsDir() {
				subdirs = append(subdirs, subdir{ent.Name(), fi})
			}
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			f.Close()
			return err
		}
	}
	if err := f.Close(); err != nil {
		return err
	}
	for _, sd := range subdirs {
		child, err := openSubdir(r, sd.name)
		if err != nil {
			if errors.Is(err, errReplaced) {
				continue
			}
			return err
		}
		if fi, err := child.Stat("."); err == nil && !os.SameFile(fi, sd.fi) {
			// Replaced by a symbolic link to another directory of the data
			// directory: never followed (walked where it is, or counted
			// twice, or, for a link to an ancestor, walked again).
			child.Close()
			continue
		}
		if err := w.dir(child, depth+1); err != nil {
			return err
		}
	}
	return nil
}

// errReplaced says that a subdirectory is gone, or no longer a directory,
// since its parent was read.
var errReplaced = errors.New("replaced since it was read")

// openSubdir opens the subdirectory name of r. When it is gone or was
// replaced since r was read (by a symbolic link leading out, which os.Root
// refuses with "path escapes"; ln -sfn's pattern) it returns errReplaced:
// the walk skips it and the next measurement counts what is there. (Session
// code cannot use this to hide a directory by renaming it in a loop:
// Kernel.measure freezes the sandbox, see measureFreezeEvery.) A
// directory that is there but cannot be opened is an error, after a few
// tries (session code may be replacing it in a loop, and a new directory
// can reuse the inode of a removed one). Red team,
// TestDiskUsageDirectoryRemovedMidWalk.
func openSubdir(r *os.Root, name string) (*os.Root, error) {
	var err error
	for range 3 {
		var child *os.Root
		if child, err = r.OpenRoot(name); err == nil {
			return child, nil
		}
		if errors.Is(err, fs.ErrNotExist) {
			return nil, errReplaced
		}
		if fi, lerr := r.Lstat(name); errors.Is(lerr, fs.ErrNotExist) || (lerr == nil && !fi.IsDir()) {
			return nil, errReplaced
		}
	}
	return nil, err
}

// subdir is a directory found by a walk, to be visited once its parent was
// read.
type subdir struct {
	name string
	fi   fs.FileInfo
}

// fileID identifies an inode.
type fileID struct{ dev, ino uint64 }

// unlinkedBytes sums the blocks of the regular files that the processes pids
// hold open but that have no name any more (unlinked while open, or created
// with O_TMPFILE) and live on the device dev (the data directory's file
// system): du does not see them, yet they take disk space until closed. Each
// inode counts once. Processes that end meanwhile, and descriptors closed
// meanwhile, are skipped; so are processes whose descriptors cannot be read
// (that is an error only for the first, the sandbox's root process, which the
// emulator can always read: a failure there is reported so that the callers
// fail closed).
//
// It runs before and after every cell (and gVisor's Gofer holds thousands of
// descriptors), so it uses the system calls directly: one descriptor of
// /proc/<pid>/fd per process (no poller registration, no os.File), its
// entries read with getdents into one buffer and each followed with fstatat
// relative to it (no path walk from /).
func unlinkedBytes(pids []int, dev uint64) (int64, error) {
	seen := map[fileID]bool{}
	var total int64
	buf := make([]byte, 8<<10)
	var names []string
	for i, pid := range pids {
		dfd, err := unix.Open("/proc/"+strconv.Itoa(pid)+"/fd", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			if i == 0 && !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ESRCH) {
				return total, err
			}
			continue
		}
		for {
			n, err := unix.Getdents(dfd, buf)
			if err == unix.EINTR {
				continue
			}
			if err != nil || n <= 0 {
				if err != nil && i == 0 && !errors.Is(err, syscall.ESRCH) && !errors.Is(err, fs.ErrNotExist) {
					_ = unix.Close(dfd)
					return total, err
				}
				break
			}
			_, _, names = unix.ParseDirent(buf[:n], -1, names[:0])
			for _, name := range names {
				var st unix.Stat_t
				// Follows the descriptor to its inode.
				if err := unix.Fstatat(dfd, name, &st, 0); err != nil {
					continue
				}
				if st.Mode&unix.S_IFMT != unix.S_IFREG || st.Nlink != 0 || uint64(st.Dev) != dev {
					continue
				}
				id := fileID{uint64(st.Dev), uint64(st.Ino)}
				if seen[id] {
					continue
				}
				seen[id] = true
				total += st.Blocks * 512
			}
		}
		_ = unix.Close(dfd)
		total += mappedUnlinkedBytes(pid, dev, seen)
	}
	return total, nil
}

// mappedUnlinkedBytes sums the blocks of the files that process pid maps
// but that have no name any more and no descriptor (written, mapped, closed
// and unlinked: red team F1, 2.5 GB held past a 1 GiB limit on bwrap), on
// the device dev, each inode once (seen is shared with unlinkedBytes). The
// inode is reached through /proc/<pid>/map_files (root with CAP_SYS_ADMIN);
// where that is refused, the mapping's length counts instead (at least what
// stays mapped).
func mappedUnlinkedBytes(pid int, dev uint64, seen map[fileID]bool) int64 {
	base := "/proc/" + strconv.Itoa(pid)
	data, err := os.ReadFile(base + "/maps")
	if err != nil {
		return 0
	}
	var total int64
	for line := range strings.Lines(string(data)) {
		line = strings.TrimSuffix(line, "\n")
		if !strings.HasSuffix(line, " (deleted)") {
			continue
		}
		// address perms offset dev inode path
		f := strings.Fields(line)
		if len(f) < 6 {
			continue
		}
		major, minor, ok := strings.Cut(f[3], ":")
		ma, err1 := strconv.ParseUint(major, 16, 32)
		mi, err2 := strconv.ParseUint(minor, 16, 32)
		ino, err3 := strconv.ParseUint(f[4], 10, 64)
		if !ok || err1 != nil || err2 != nil || err3 != nil || ino == 0 || unix.Mkdev(uint32(ma), uint32(mi)) != dev {
			continue
		}
		id := fileID{dev, ino}
		if seen[id] {
			continue
		}
		seen[id] = true
		var st unix.Stat_t
		if err := unix.Stat(base+"/map_files/"+f[0], &st); err == nil {
			if st.Mode&unix.S_IFMT == unix.S_IFREG && st.Nlink == 0 {
				total += st.Blocks * 512
			}
			continue
		}
		start, end, _ := strings.Cut(f[0], "-")
		lo, err1 := strconv.ParseUint(start, 16, 64)
		hi, err2 := strconv.ParseUint(end, 16, 64)
		if err1 == nil && err2 == nil && hi > lo {
			total += int64(hi - lo)
		}
	}
	return total
}

// processTree lists root and its descendants, from /proc/<pid>/task/*/children
// (used when the sandbox has no cgroup to list them).
func processTree(root int) []int {
	out := []int{root}
	seen := map[int]bool{root: true}
	for i := 0; i < len(out) && len(out) < 1<<16; i++ {
		tasks, err := os.ReadDir("/proc/" + strconv.Itoa(out[i]) + "/task")
		if err != nil {
			continue
		}
		for _, task := range tasks {
			data, err := os.ReadFile("/proc/" + strconv.Itoa(out[i]) + "/task/" + task.Name() + "/children")
			if err != nil {
				continue
			}
			for _, f := range strings.Fields(string(data)) {
				if pid, err := strconv.Atoi(f); err == nil && !seen[pid] {
					seen[pid] = true
					out = append(out, pid)
				}
			}
		}
	}
	return out
}

// kcmpVM is KCMP_VM of kcmp(2).
const kcmpVM = 1

// withThreads is pids (processes: thread-group ids, in order) followed by,
// for each, the threads whose descriptor table or address space differs
// from its leader's and from those already added: /proc/<pid>/fd and
// /proc/<pid>/maps are the leader's, and once the leader thread ends (the
// exit system call, not exit_group) while other threads go on, both are
// empty, so the files those threads hold open after unlinking them, or map,
// would not be counted (red team, TestUnlinkedFilesOfZombieLeaderCounted:
// 2.4 GB past a 1 GiB limit on bwrap). A thread made with clone without
// CLONE_FILES has a table of its own too. Threads that share their
// leader's table and address space (every thread of ordinary code) are
// compared (kcmp) and skipped; a process whose threads cannot be listed
// (it ended meanwhile) is left as it is.
func withThreads(pids []int) []int {
	out := append([]int(nil), pids...)
	buf := make([]byte, 4<<10)
	var names []string
	for _, pid := range pids {
		dfd, err := unix.Open("/proc/"+strconv.Itoa(pid)+"/task", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			continue
		}
		reps := []int{pid}
		for {
			n, err := unix.Getdents(dfd, buf)
			if err == unix.EINTR {
				continue
			}
			if err != nil || n <= 0 {
				break
			}
			_, _, names = unix.ParseDirent(buf[:n], -1, names[:0])
			for _, name := range names {
				tid, err := strconv.Atoi(name)
				if err != nil || tid == pid {
					continue
				}
				if !sharesTables(tid, reps) {
					reps = append(reps, tid)
					out = append(out, tid)
				}
			}
		}
		_ = unix.Close(dfd)
	}
	return out
}

// sharesTables reports whether thread tid has the descriptor table and the
// address space of one of reps (kcmp; an error counts as not).
func sharesTables(tid int, reps []int) bool {
	for _, r := range reps {
		files, _, errno1 := unix.Syscall6(unix.SYS_KCMP, uintptr(tid), uintptr(r), kcmpFiles, 0, 0, 0)
		vm, _, errno2 := unix.Syscall6(unix.SYS_KCMP, uintptr(tid), uintptr(r), kcmpVM, 0, 0, 0)
		if errno1 == 0 && errno2 == 0 && files == 0 && vm == 0 {
			return true
		}
	}
	return false
}
