package emulator

import (
	"container/heap"
	"encoding/base64"
	"errors"
	"io"
	"io/fs"
	"mime"
	"mime/multipart"
	"net/http"
	"net/url"
	"os"
	"path"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"unicode"
	"unicode/utf8"

	"github.com/azsessions/azsessions/internal/kernel"
	"github.com/azsessions/azsessions/internal/uuid"
	"github.com/azsessions/azsessions/internal/wire"
)

// uploadPrefix names the temporary files of uploads in progress; listings
// hide them.
const uploadPrefix = ".azsessions-upload-"

// multipartSlack is the room a multipart body may take beyond MaxUploadBytes
// for its boundaries and headers.
const multipartSlack = 1 << 20

// cleanRel turns a client path (relative, or absolute under /mnt/data) into a
// clean slash path relative to the data directory; "" is the directory
// itself. It rejects "..", NUL and absolute paths elsewhere.
func cleanRel(p string) (string, *apiError) {
	if strings.ContainsRune(p, 0) {
		return "", badRequest("the path contains a NUL character")
	}
	switch {
	case p == "/":
		// The 2025-02-02-preview example SessionResourceFiles_Upload.json
		// uploads with path=/; the emulator reads it as the data directory
		// (a guess: no source says what / names).
		p = ""
	case p == wire.DataDir || strings.HasPrefix(p, wire.DataDir+"/"):
		p = p[len(wire.DataDir):]
	case strings.HasPrefix(p, "/"):
		return "", badRequest("an absolute path must be under %s", wire.DataDir)
	}
	for _, seg := range strings.Split(p, "/") {
		if seg == ".." {
			return "", badRequest("the path must not contain ..")
		}
	}
	return strings.TrimPrefix(path.Clean("/"+p), "/"), nil
}

// filePath returns the path of {name} (in the directory of the path query
// parameter) relative to the data directory.
func filePath(c *call) (dir, rel string, aerr *apiError) {
	if dir, aerr = cleanRel(c.r.URL.Query().Get("path")); aerr != nil {
		return "", "", aerr
	}
	name, aerr := cleanRel(c.params["name"])
	if aerr != nil {
		return "", "", aerr
	}
	if name == "" {
		return "", "", badRequest("the file name is empty")
	}
	return dir, path.Join(dir, name), nil
}

// errFileNotFound is the answer of every read route (get, download, list,
// delete) whose path is missing, is not a regular file or directory, or
// leads out of the data directory through a symlink: one answer for all, so
// that code in the session cannot probe which host paths exist. Paths are
// resolved by os.Root only, which refuses to leave the data directory without
// looking at the host path a symlink names.
func errFileNotFound() *apiError {
	return errorf(http.StatusNotFound, CodeFileNotFound, "file not found")
}

// fsError maps an error of an os.Root operation of a read route.
func fsError(error) *apiError { return errFileNotFound() }

// openRoot opens the session's data directory confined with os.Root, so
// that no operation follows a symlink out of it.
func openRoot(c *call) (*os.Root, *apiError) {
	root, err := os.OpenRoot(c.sess.kernel.DataDir())
	if err != nil {
		return nil, internal("the session's data directory is gone")
	}
	return root, nil
}

func contentType(name string) string {
	if t := mime.TypeByExtension(path.Ext(name)); t != "" {
		return t
	}
	return "application/octet-stream"
}

// fileForm says where a SessionResourceFile is answered.
type fileForm int

const (
	formSingle    fileForm = iota // upload, GET files/{name}
	formListed                    // a listing
	formRecursive                 // a recursive listing
)

// newFile builds the SessionResourceFile of a file, in the shape of the spec
// examples of the request's api-version: dir is its directory as reported in
// the directory field, which only listings on 2025-10-02-preview carry
// (SessionResourceFiles_List.json and _List_Recursive.json have it;
// SessionResourceFiles_Get.json and _Upload.json do not). A directory is
// {name, type, lastModifiedAt} before 2025-10-02-preview and has contentType
// application/octet-stream and its size from then on; its type is
// "directory" in recursive listings and "Directory" elsewhere, as in the
// examples.
func newFile(c *call, name, dir string, fi fs.FileInfo, form fileForm) wire.File {
	f := wire.File{Name: name, Type: wire.FileTypeFile, ContentType: contentType(name), SizeInBytes: fi.Size(), LastModifiedAt: fi.ModTime().UTC()}
	if fi.IsDir() {
		f.Type, f.ContentType = wire.FileTypeDirectory, "application/octet-stream"
		if form == formRecursive {
			f.Type = wire.FileTypeDirectoryRecursive
		}
		if !c.feat.Recursive {
			f.ContentType, f.OmitSize = "", true
		}
	}
	if c.feat.Recursive && form != formSingle {
		f.Directory = &dir
	}
	return f
}

// legacyList builds the legacy {"$id","value":[{"$id","properties":{...}}]}
// list, numbering the $id references as the service does.
func legacyList(entries []entry) wire.LegacyFileList {
	out := wire.LegacyFileList{ID: "1", Value: make([]wire.LegacyFileEntry, 0, len(entries))}
	n := 1
	for _, e := range entries {
		out.Value = append(out.Value, wire.LegacyFileEntry{ID: strconv.Itoa(n + 1), Properties: wire.LegacyFileProps{
			ID: strconv.Itoa(n + 2), Filename: e.rel, Size: e.fi.Size(), LastModifiedTime: e.fi.ModTime().UTC(),
		}})
		n += 2
	}
	return out
}

// entry is one listed file.
type entry struct {
	rel string // relative to the data directory
	fi  fs.FileInfo
}

// maxListDepth bounds how deep a recursive listing descends below its
// directory; a deeper tree is refused with 400 FileListTooLarge.
const maxListDepth = 256

// maxListPathBytes bounds the sum of the lengths of the paths a listing
// collects (deep trees of long names); beyond it the answer is 400
// FileListTooLarge.
const maxListPathBytes = 16 << 20

// readDirBatch is how many directory entries a listing reads at a time
// between checks of the request's context.
const readDirBatch = 512

// errListTooLarge is the answer to a listing over one of its bounds.
func errListTooLarge(maxEntries int) *apiError {
	return errorf(http.StatusBadRequest, CodeFileListTooLarge, "the listing is over its limits (%d entries, %d directory levels, %d bytes of paths); list a subdirectory without recursive instead", maxEntries, maxListDepth, maxListPathBytes)
}

// walker lists a directory tree with one directory handle per level: each
// directory is opened relative to its parent's handle and each entry is
// stat'ed relative to its directory, so the cost is linear in the size of
// the tree, whatever its depth. It stops at the bounds and when done
// reports an error (the client is gone or the session ended).
type walker struct {
	top        *os.Root // the data directory
	done       func() error
	recursive  bool
	filesOnly  bool
	maxEntries int
	// pageSize > 0 makes a paged listing (the executions contract): it keeps
	// only the pageSize+1 smallest paths after the path after, in page, and is
	// bounded by pageSize instead of maxEntries.
	pageSize int
	after    string
	page     entryHeap

	out       []entry
	seen      int // entries listed and directories entered
	pathBytes int
	tooLarge  bool
}

var errWalkLimit = errors.New("listing limit")

// count charges one entry of path rel against the bounds.
func (w *walker) count(rel string) error {
	w.seen++
	w.pathBytes += len(rel)
	if w.seen > w.maxEntries || w.pathBytes > maxListPathBytes {
		w.tooLarge = true
		return errWalkLimit
	}
	return nil
}

// add lists one entry: into out, charged against the bounds, or, in a paged
// listing, into page when it sorts after the continuation point and among
// the first pageSize+1.
func (w *walker) add(rel string, fi fs.FileInfo) error {
	if w.pageSize <= 0 {
		if err := w.count(rel); err != nil {
			return err
		}
		w.out = append(w.out, entry{rel, fi})
		return nil
	}
	if rel <= w.after || (len(w.page) > w.pageSize && rel >= w.page[0].rel) {
		return nil
	}
	heap.Push(&w.page, entry{rel, fi})
	w.pathBytes += len(rel)
	if len(w.page) > w.pageSize+1 {
		w.pathBytes -= len(heap.Pop(&w.page).(entry).rel)
	}
	if w.pathBytes > maxListPathBytes {
		w.tooLarge = true
		return errWalkLimit
	}
	return nil
}

// entryHeap is a max-heap of entries by path.
type entryHeap []entry

func (h entryHeap) Len() int           { return len(h) }
func (h entryHeap) Less(i, j int) bool { return h[i].rel > h[j].rel }
func (h entryHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *entryHeap) Push(x any)        { *h = append(*h, x.(entry)) }
func (h *entryHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

// walk lists dir (relative to the root) into w.out, unsorted. Symlinks are
// followed only when they stay inside the root, and never recursed into;
// upload temporaries, special files and names that are not listable (see
// listableName) are left out.
func (w *walker) walk(dir string) error {
	// "dir/." opens dir as an intermediate component, with O_DIRECTORY: a
	// FIFO put in its place cannot block the open.
	r, err := w.top.OpenRoot(orDot(dir) + "/.")
	if err != nil {
		return err
	}
	defer r.Close()
	return w.walkDir(r, dir, 0)
}

func (w *walker) walkDir(r *os.Root, dir string, depth int) error {
	if err := w.done(); err != nil {
		return err
	}
	f, err := openDir(r, "")
	if err != nil {
		if depth > 0 && errors.Is(err, fs.ErrNotExist) {
			return nil // removed since it was read: see below
		}
		return err
	}
	var subdirs []string
	for {
		des, rerr := f.ReadDir(readDirBatch)
		if depth > 0 && errors.Is(rerr, fs.ErrNotExist) {
			// A subdirectory removed since its parent was read (code in the
			// session making and removing directories) reads as ENOENT; it is
			// empty, and left out like one gone before it was opened. It
			// answered the whole listing 404 (red team,
			// TestListingWhileDirectoriesVanish).
			rerr = io.EOF
		}
		for _, de := range des {
			name := de.Name()
			if strings.HasPrefix(name, uploadPrefix) || !listableName(name) {
				continue
			}
			rel := path.Join(dir, name)
			var fi fs.FileInfo
			link := de.Type()&fs.ModeSymlink != 0
			if link {
				fi, err = w.top.Stat(rel) // fails for links leading out of the root
			} else {
				fi, err = r.Lstat(name) // relative to the directory's handle
			}
			if err != nil {
				continue
			}
			switch {
			case fi.IsDir():
				if !w.filesOnly {
					if err := w.add(rel, fi); err != nil {
						f.Close()
						return err
					}
				}
				if w.recursive && !link && fi.Mode().Type() == fs.ModeDir {
					if w.filesOnly { // a directory to enter counts as an entry
						if err := w.count(rel); err != nil {
							f.Close()
							return err
						}
					}
					subdirs = append(subdirs, name)
				}
			case fi.Mode().IsRegular():
				if err := w.add(rel, fi); err != nil {
					f.Close()
					return err
				}
			}
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			f.Close()
			return rerr
		}
		if err := w.done(); err != nil {
			f.Close()
			return err
		}
	}
	f.Close()
	if len(subdirs) > 0 && depth >= maxListDepth {
		w.tooLarge = true
		return errWalkLimit
	}
	for _, name := range subdirs {
		rel := path.Join(dir, name)
		sub, err := r.OpenRoot(name + "/.")
		if err != nil {
			continue // gone or replaced since it was read
		}
		err = w.walkDir(sub, rel, depth+1)
		sub.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

// list lists dir for c: it answers 400 FileListTooLarge over the bounds and
// stops when the client goes away or the session ends. With pageSize > 0 it
// returns at most pageSize entries sorting after after, and more is true
// when others follow.
func (h *Handler) list(c *call, root *os.Root, dir string, recursive, filesOnly bool, pageSize int, after string) (entries []entry, more bool, aerr *apiError) {
	reqCtx, sessCtx := c.r.Context(), c.sess.ctx
	w := &walker{top: root, recursive: recursive, filesOnly: filesOnly, maxEntries: h.opt.MaxListEntries, pageSize: pageSize, after: after,
		done: func() error {
			if err := reqCtx.Err(); err != nil {
				return err
			}
			return sessCtx.Err()
		}}
	if err := w.walk(dir); err != nil {
		if w.tooLarge {
			return nil, false, errListTooLarge(h.opt.MaxListEntries)
		}
		return nil, false, fsError(err)
	}
	out := w.out
	if pageSize > 0 {
		out = []entry(w.page)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].rel < out[j].rel })
	if pageSize > 0 && len(out) > pageSize {
		return out[:pageSize], true, nil
	}
	return out, false, nil
}

// openDir opens a directory of the data directory. O_DIRECTORY makes it fail
// at once on anything else: a FIFO put in place of the directory would block
// a plain open forever.
func openDir(root *os.Root, dir string) (*os.File, error) {
	return root.OpenFile(orDot(dir), os.O_RDONLY|oDirectory, 0)
}

// openRegular opens a regular file of the data directory for reading. It
// opens with O_NONBLOCK, so that a FIFO or device swapped in after a stat,
// or a write lease session code holds on the file (EWOULDBLOCK instead of
// 45 s of lease-break-time; TestLeasedFileNeverBlocks), cannot block the
// request, and checks the type of what it opened (fstat):
// anything but a regular file is not found. O_NONBLOCK does not change how
// regular files read.
func openRegular(root *os.Root, rel string) (*os.File, fs.FileInfo, error) {
	f, err := root.OpenFile(rel, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, nil, errors.New("not a regular file")
	}
	return f, fi, nil
}

// listableName reports whether a name found in the data directory can be
// listed: valid UTF-8 without control characters. JSON cannot carry other
// bytes faithfully (invalid UTF-8 becomes U+FFFD, naming another file), and
// uploads refuse control characters, so listings leave such names out,
// consistently on every api-version; code in the session still sees them.
func listableName(name string) bool {
	return utf8.ValidString(name) && !hasControl(name)
}

// hasControl reports whether s contains a control character (C0, DEL or C1).
func hasControl(s string) bool {
	for _, r := range s {
		if unicode.IsControl(r) {
			return true
		}
	}
	return false
}

func orDot(p string) string {
	if p == "" {
		return "."
	}
	return p
}

func relDir(rel string) string {
	if d := path.Dir(rel); d != "." {
		return d
	}
	return ""
}

// upload serves POST files/upload (legacy; the part's filename may carry a
// directory) and POST files (new; the path query parameter names the
// directory). The part streams to a temporary file in the target directory
// that is renamed into place, so a failed or oversize upload leaves nothing.
func (h *Handler) upload(c *call) *apiError {
	defer h.watchBody(c)()
	limit := h.opt.MaxUploadBytes
	tooLarge := errorf(http.StatusRequestEntityTooLarge, CodePayloadTooLarge, "the file is larger than the upload limit of %d bytes", limit)
	if c.r.ContentLength > limit+multipartSlack {
		return tooLarge
	}
	c.r.Body = http.MaxBytesReader(c.w, c.r.Body, limit+multipartSlack)
	mr, err := c.r.MultipartReader()
	if err != nil {
		return badRequest("the body must be multipart/form-data with a part named file")
	}
	var part *multipart.Part
	var filename string
	for {
		p, err := mr.NextPart()
		if err != nil {
			var mbe *http.MaxBytesError
			if errors.As(err, &mbe) {
				return tooLarge
			}
			return badRequest("the body must be multipart/form-data with a part named file")
		}
		if p.FormName() != "file" {
			continue
		}
		// Part.FileName drops directories; the legacy contract allows them.
		_, params, _ := mime.ParseMediaType(p.Header.Get("Content-Disposition"))
		filename, part = params["filename"], p
		break
	}
	// The spec has one part named file (file: HttpPart<bytes>); a second one
	// is refused after the first is stored (see below), never dropped.
	dir, aerr := cleanRel(c.r.URL.Query().Get("path"))
	if aerr != nil {
		return aerr
	}
	name, aerr := cleanRel(filename)
	if aerr != nil {
		return aerr
	}
	if name == "" {
		return badRequest("the file part has no filename")
	}
	if hasControl(name) || hasControl(dir) || !utf8.ValidString(name) || !utf8.ValidString(dir) {
		return badRequest("the file name and path must be UTF-8 without control characters")
	}
	rel := path.Join(dir, name)
	parent := relDir(rel)
	// Every failure to store the file gets the same answer, whatever the
	// reason (a symlink out of the data directory, a file in the way), so
	// that it tells nothing about host paths.
	cannotStore := badRequest("the file cannot be stored at this path")
	root, aerr := openRoot(c)
	if aerr != nil {
		return aerr
	}
	defer root.Close()
	if err := root.MkdirAll(orDot(parent), 0o755); err != nil {
		return cannotStore
	}
	quota, aerr := h.uploadQuota(c, root, rel)
	if aerr != nil {
		return aerr
	}
	if quota != nil {
		defer quota.release()
	}
	tmp := path.Join(parent, uploadPrefix+uuid.New())
	f, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return cannotStore
	}
	var dst io.Writer = f
	if quota != nil {
		quota.w = f
		dst = quota
	}
	n, err := io.Copy(dst, io.LimitReader(part, limit+1))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil && n <= limit {
		if aerr := noSecondFilePart(mr); aerr != nil {
			_ = root.Remove(tmp)
			return aerr
		}
	}
	var mbe *http.MaxBytesError
	switch {
	case errors.Is(err, errDataDirFull):
		_ = root.Remove(tmp)
		return quota.full()
	case n > limit || errors.As(err, &mbe):
		_ = root.Remove(tmp)
		return tooLarge
	case err != nil:
		_ = root.Remove(tmp)
		return badRequest("the upload was interrupted")
	}
	// Rename replaces whatever is at rel (a symlink itself, never its
	// target) and opens nothing.
	if err := root.Rename(tmp, rel); err != nil {
		_ = root.Remove(tmp)
		return badRequest("the file cannot be stored at this path (is it a directory?)")
	}
	fi, err := root.Lstat(rel)
	if err != nil {
		return cannotStore
	}
	if c.feat.Legacy {
		c.writeJSON(http.StatusOK, legacyList([]entry{{rel, fi}}))
		return nil
	}
	c.writeJSON(http.StatusOK, newFile(c, path.Base(rel), relDir(name), fi, formSingle))
	return nil
}

// noSecondFilePart reads the rest of an upload's body and answers 400
// SessionRequestValidationFailed when it has another part named file: the
// spec's upload has exactly one (a second one would otherwise be dropped
// silently). Other parts are skipped.
func noSecondFilePart(mr *multipart.Reader) *apiError {
	for {
		p, err := mr.NextPart()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return badRequest("the body must be multipart/form-data with a part named file")
		}
		if p.FormName() == "file" {
			return badRequest("the body has more than one part named file; upload one file per request")
		}
	}
}

// errDataDirFull stops an upload that would pass the data directory's limit.
var errDataDirFull = errors.New("the data directory is full")

// uploadQuota is the room an upload has in a data directory with a disk
// limit (a kernel that implements kernel.SpaceReporter). The bytes an upload
// writes are reserved in its session while it runs, so that concurrent
// uploads of one session cannot pass the limit together.
type uploadQuota struct {
	w       io.Writer
	s       *session
	room    int64 // limit - used + what the replaced file frees
	limit   int64
	written int64
}

// uploadQuota measures the room of an upload to rel, or returns nil when the
// kernel reports no limit. An upload whose Content-Length is already over
// the room is refused at once.
func (h *Handler) uploadQuota(c *call, root *os.Root, rel string) (*uploadQuota, *apiError) {
	sr, ok := c.sess.kernel.(kernel.SpaceReporter)
	if !ok {
		return nil, nil
	}
	used, limit, err := sr.DataDirSpace()
	if err != nil {
		h.log.Error("measuring the data directory failed", "err", err)
		return nil, internal("measuring the session's data directory failed")
	}
	if limit <= 0 {
		return nil, nil
	}
	q := &uploadQuota{s: c.sess, room: limit - used + replacedBytes(root, rel), limit: limit}
	q.s.upMu.Lock()
	reserved := q.s.upReserved
	q.s.upMu.Unlock()
	if c.r.ContentLength > q.room-reserved+multipartSlack {
		return nil, q.full()
	}
	return q, nil
}

// replacedBytes is what replacing rel frees: the blocks of the regular file
// there, unless another hard link keeps them.
func replacedBytes(root *os.Root, rel string) int64 {
	fi, err := root.Lstat(rel)
	if err != nil || !fi.Mode().IsRegular() {
		return 0
	}
	if nlink, blocks, ok := fileBlocks(fi); ok {
		if nlink > 1 {
			return 0
		}
		return blocks
	}
	return fi.Size()
}

func (q *uploadQuota) Write(p []byte) (int, error) {
	n := int64(len(p))
	q.s.upMu.Lock()
	if q.s.upReserved+n > q.room {
		q.s.upMu.Unlock()
		return 0, errDataDirFull
	}
	q.s.upReserved += n
	q.written += n
	q.s.upMu.Unlock()
	return q.w.Write(p)
}

// release returns the bytes the upload reserved (the file is then counted
// by the kernel's report, or removed).
func (q *uploadQuota) release() {
	q.s.upMu.Lock()
	q.s.upReserved -= q.written
	q.written = 0
	q.s.upMu.Unlock()
}

func (q *uploadQuota) full() *apiError {
	return errorf(http.StatusRequestEntityTooLarge, CodeDataDirFull, "the file does not fit in the session's data directory (limit %d bytes)", q.limit)
}

// listFiles serves GET files: on the legacy contract every file, recursively,
// named by its path; on the new one the entries of the path directory
// (recursively with recursive=true on 2025-10-02-preview, with directory
// relative to path).
func (h *Handler) listFiles(c *call) *apiError {
	root, aerr := openRoot(c)
	if aerr != nil {
		return aerr
	}
	defer root.Close()
	if c.feat.Legacy {
		entries, _, aerr := h.list(c, root, "", true, true, 0, "")
		if aerr != nil {
			return aerr
		}
		c.writeJSON(http.StatusOK, legacyList(entries))
		return nil
	}
	q := c.r.URL.Query()
	dir, aerr := cleanRel(q.Get("path"))
	if aerr != nil {
		return aerr
	}
	recursive := false
	if c.feat.Recursive && q.Has("recursive") {
		// The swagger's recursive is a boolean: anything but true or false
		// is refused rather than read as false.
		switch v := q.Get("recursive"); {
		case strings.EqualFold(v, "true"):
			recursive = true
		case strings.EqualFold(v, "false"):
		default:
			return badRequest("recursive must be true or false")
		}
	}
	after := ""
	if tok := q.Get(pageTokenParam); tok != "" {
		b, err := base64.RawURLEncoding.DecodeString(tok)
		if err != nil || !utf8.Valid(b) {
			return badRequest("the %s of this nextLink is not valid", pageTokenParam)
		}
		after = string(b)
	}
	entries, more, aerr := h.list(c, root, dir, recursive, false, h.opt.MaxListEntries, after)
	if aerr != nil {
		return aerr
	}
	form := formListed
	if recursive {
		form = formRecursive
	}
	list := wire.FileList{Value: make([]wire.File, 0, len(entries))}
	for _, e := range entries {
		under := strings.TrimPrefix(e.rel, dir+"/")
		if dir == "" {
			under = e.rel
		}
		list.Value = append(list.Value, newFile(c, path.Base(e.rel), relDir(under), e.fi, form))
	}
	if more {
		nq := url.Values{"api-version": {c.version}, "identifier": {c.ident}}
		for _, k := range []string{"path", "recursive"} {
			if q.Has(k) {
				nq.Set(k, q.Get(k))
			}
		}
		nq.Set(pageTokenParam, base64.RawURLEncoding.EncodeToString([]byte(entries[len(entries)-1].rel)))
		next := baseURL(c.r) + h.poolPath + "/files?" + nq.Encode()
		list.NextLink = &next
	}
	c.writeJSON(http.StatusOK, list)
	return nil
}

// pageTokenParam is the query parameter of a file listing's nextLink that
// says where the next page starts (the path of the last entry answered,
// base64url). The spec makes GET files x-ms-pageable with nextLink and does
// not say what the link carries; this parameter is the emulator's own.
const pageTokenParam = "continuationToken"

// statFile resolves {name} of a read route and stats it (following symlinks
// that stay inside the data directory). dir is the name's directory relative
// to the path parameter (the directory field). Anything but a regular file or
// a directory is not found.
func statFile(c *call) (root *os.Root, dir, rel string, fi fs.FileInfo, aerr *apiError) {
	var base string
	if base, rel, aerr = filePath(c); aerr != nil {
		return nil, "", "", nil, aerr
	}
	dir = relDir(strings.TrimPrefix(rel, base+"/"))
	if base == "" {
		dir = relDir(rel)
	}
	if root, aerr = openRoot(c); aerr != nil {
		return nil, "", "", nil, aerr
	}
	fi, err := root.Stat(rel)
	if err != nil || !(fi.Mode().IsRegular() || fi.IsDir()) {
		root.Close()
		return nil, "", "", nil, errFileNotFound()
	}
	return root, dir, rel, fi, nil
}

// getFile serves GET files/{name}: a list with one item on the legacy
// contract, a SessionResourceFile on the new one.
func (h *Handler) getFile(c *call) *apiError {
	root, dir, rel, fi, aerr := statFile(c)
	if aerr != nil {
		return aerr
	}
	root.Close()
	if c.feat.Legacy {
		c.writeJSON(http.StatusOK, legacyList([]entry{{rel, fi}}))
		return nil
	}
	c.writeJSON(http.StatusOK, newFile(c, path.Base(rel), dir, fi, formSingle))
	return nil
}

// download serves GET files/content/{name} and GET files/{name}/content: the
// raw bytes with the file's Content-Type, Last-Modified and range support.
func (h *Handler) download(c *call) *apiError {
	root, _, rel, fi, aerr := statFile(c)
	if aerr != nil {
		return aerr
	}
	defer root.Close()
	if fi.IsDir() {
		return badRequest("the path is not a file")
	}
	// The file may have been swapped since the stat: use what was opened.
	f, fi, err := openRegular(root, rel)
	if err != nil {
		return errFileNotFound()
	}
	defer f.Close()
	c.w.Header().Set("Content-Type", contentType(rel))
	c.answering() // the file is open: the session may be released
	http.ServeContent(c.w, c.r, "", fi.ModTime(), f)
	return nil
}

// deleteFile serves DELETE files/{name}: 204 on the new contract, 200
// {"message":"file deleted successfully"} on the legacy one. A symlink is
// removed itself, never its target; a directory with its content.
func (h *Handler) deleteFile(c *call) *apiError {
	_, rel, aerr := filePath(c)
	if aerr != nil {
		return aerr
	}
	root, aerr := openRoot(c)
	if aerr != nil {
		return aerr
	}
	defer root.Close()
	if _, err := root.Lstat(rel); err != nil {
		return fsError(err)
	}
	if err := root.RemoveAll(rel); err != nil {
		return fsError(err)
	}
	if c.feat.Legacy {
		c.writeJSON(http.StatusOK, map[string]string{"message": "file deleted successfully"})
		return nil
	}
	c.writeHeader(http.StatusNoContent)
	return nil
}
