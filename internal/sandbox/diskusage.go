package sandbox

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
)

// maxWalkDepth bounds how deep diskUsage descends. It holds one directory
// descriptor per level, so the bound keeps it well inside RLIMIT_NOFILE; a
// deeper tree is an error, which the callers treat as over the limit. It is
// far beyond PATH_MAX: 2,049 levels of one-character names already do not fit.
const maxWalkDepth = 4096

// errTooManyEntries is returned by diskUsage when the tree has more entries
// than it was asked to count.
var errTooManyEntries = errors.New("too many files and directories")

// errTooDeep is returned by diskUsage for a tree deeper than maxWalkDepth.
var errTooDeep = fmt.Errorf("the directory tree is deeper than %d levels", maxWalkDepth)

// usageError describes an error of diskUsage without the host paths that
// os errors carry (the text goes to the sandboxed code).
func usageError(err error) string {
	var errno syscall.Errno
	switch {
	case errors.Is(err, errTooDeep), errors.Is(err, errTooManyEntries):
		return err.Error()
	case errors.As(err, &errno):
		return errno.Error()
	}
	return "an error"
}

// usage is what diskUsage measured.
type usage struct {
	bytes   int64 // allocated blocks (st_blocks * 512) of every entry, directories included
	entries int64 // files, directories, symlinks and special files, the top directory excluded
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
	err = walkUsage(r, 1, maxEntries, &u)
	return u, err
}

// blocks is the allocated size of fi in bytes.
func blocks(fi os.FileInfo) int64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return st.Blocks * 512
	}
	return fi.Size()
}

// walkUsage adds the entries under r, which it closes. Entries are read in
// batches and stat-ed relative to the directory's descriptor (os.Root does
// fstatat); subdirectories are visited after the directory is closed, so a
// level holds one descriptor (its Root) while deeper levels are walked.
func walkUsage(r *os.Root, depth int, maxEntries int64, u *usage) error {
	defer r.Close()
	if depth > maxWalkDepth {
		return errTooDeep
	}
	f, err := r.Open(".")
	if err != nil {
		return err
	}
	var subdirs []string
	for {
		ents, err := f.ReadDir(512)
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
			if maxEntries > 0 && u.entries > maxEntries {
				f.Close()
				return errTooManyEntries
			}
			if fi.IsDir() {
				subdirs = append(subdirs, ent.Name())
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
	for _, name := range subdirs {
		child, err := r.OpenRoot(name)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			return err
		}
		if err := walkUsage(child, depth+1, maxEntries, u); err != nil {
			return err
		}
	}
	return nil
}
