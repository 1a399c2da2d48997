package emulator

import (
	"errors"
	"io"
	"io/fs"
	"mime"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

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

// checkInside fails unless rel, with every symlink resolved, stays inside the
// data directory (code in a session can create symlinks). A missing file is 404.
func checkInside(dataDir, rel string) *apiError {
	root, err := filepath.EvalSymlinks(dataDir)
	if err != nil {
		return internal("the session's data directory is gone")
	}
	full, err := filepath.EvalSymlinks(filepath.Join(root, filepath.FromSlash(rel)))
	if errors.Is(err, fs.ErrNotExist) {
		return errorf(http.StatusNotFound, CodeFileNotFound, "file not found")
	}
	if err != nil {
		return badRequest("the path cannot be resolved")
	}
	if full != root && !strings.HasPrefix(full, root+string(filepath.Separator)) {
		return badRequest("the path leads out of the data directory")
	}
	return nil
}

// fsError maps an error of an os.Root operation.
func fsError(err error) *apiError {
	if errors.Is(err, fs.ErrNotExist) {
		return errorf(http.StatusNotFound, CodeFileNotFound, "file not found")
	}
	return badRequest("the path cannot be used: it leads out of the data directory or has the wrong type")
}

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

// newFile builds the SessionResourceFile of a file; dir is its directory as
// reported in the directory field (2025-10-02-preview only).
func newFile(c *call, name, dir string, fi fs.FileInfo) wire.File {
	f := wire.File{Name: name, Type: wire.FileTypeFile, ContentType: contentType(name), SizeInBytes: fi.Size(), LastModifiedAt: fi.ModTime().UTC()}
	if fi.IsDir() {
		f.Type, f.ContentType = wire.FileTypeDirectory, "application/octet-stream"
	}
	if c.feat.Recursive {
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

// walk lists dir (relative to the root). Symlinks are followed only when
// they stay inside the root, and never recursed into; upload temporaries and
// special files are left out.
func walk(root *os.Root, dir string, recursive, filesOnly bool) ([]entry, error) {
	f, err := root.Open(orDot(dir))
	if err != nil {
		return nil, err
	}
	des, err := f.ReadDir(-1)
	f.Close()
	if err != nil {
		return nil, err
	}
	var out []entry
	for _, de := range des {
		if strings.HasPrefix(de.Name(), uploadPrefix) {
			continue
		}
		rel := path.Join(dir, de.Name())
		var fi fs.FileInfo
		link := de.Type()&fs.ModeSymlink != 0
		if link {
			fi, err = root.Stat(rel) // fails for links leading out of the root
		} else {
			fi, err = de.Info()
		}
		if err != nil {
			continue
		}
		switch {
		case fi.IsDir():
			if !filesOnly {
				out = append(out, entry{rel, fi})
			}
			if recursive && !link {
				sub, err := walk(root, rel, recursive, filesOnly)
				if err != nil {
					return nil, err
				}
				out = append(out, sub...)
			}
		case fi.Mode().IsRegular():
			out = append(out, entry{rel, fi})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].rel < out[j].rel })
	return out, nil
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
	var part io.Reader
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
	rel := path.Join(dir, name)
	parent := relDir(rel)
	root, aerr := openRoot(c)
	if aerr != nil {
		return aerr
	}
	defer root.Close()
	if err := root.MkdirAll(orDot(parent), 0o755); err != nil {
		return fsError(err)
	}
	tmp := path.Join(parent, uploadPrefix+newUUID())
	f, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return fsError(err)
	}
	n, err := io.Copy(f, io.LimitReader(part, limit+1))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	var mbe *http.MaxBytesError
	switch {
	case n > limit || errors.As(err, &mbe):
		_ = root.Remove(tmp)
		return tooLarge
	case err != nil:
		_ = root.Remove(tmp)
		return badRequest("the upload was interrupted")
	}
	if err := root.Rename(tmp, rel); err != nil {
		_ = root.Remove(tmp)
		return badRequest("the file cannot be stored at this path (is it a directory?)")
	}
	fi, err := root.Stat(rel)
	if err != nil {
		return fsError(err)
	}
	if c.feat.Legacy {
		writeJSON(c.w, http.StatusOK, legacyList([]entry{{rel, fi}}))
		return nil
	}
	writeJSON(c.w, http.StatusOK, newFile(c, path.Base(rel), parent, fi))
	return nil
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
		entries, err := walk(root, "", true, true)
		if err != nil {
			return fsError(err)
		}
		writeJSON(c.w, http.StatusOK, legacyList(entries))
		return nil
	}
	dir, aerr := cleanRel(c.r.URL.Query().Get("path"))
	if aerr != nil {
		return aerr
	}
	if dir != "" {
		if aerr := checkInside(c.sess.kernel.DataDir(), dir); aerr != nil {
			return aerr
		}
	}
	recursive := false
	if c.feat.Recursive {
		recursive, _ = strconv.ParseBool(c.r.URL.Query().Get("recursive"))
	}
	entries, err := walk(root, dir, recursive, false)
	if err != nil {
		return fsError(err)
	}
	list := wire.FileList{Value: make([]wire.File, 0, len(entries))}
	for _, e := range entries {
		under := strings.TrimPrefix(e.rel, dir+"/")
		if dir == "" {
			under = e.rel
		}
		list.Value = append(list.Value, newFile(c, path.Base(e.rel), relDir(under), e.fi))
	}
	writeJSON(c.w, http.StatusOK, list)
	return nil
}

// statFile resolves {name} of a read route and stats it.
func statFile(c *call) (root *os.Root, dir, rel string, fi fs.FileInfo, aerr *apiError) {
	if dir, rel, aerr = filePath(c); aerr != nil {
		return nil, "", "", nil, aerr
	}
	if aerr = checkInside(c.sess.kernel.DataDir(), rel); aerr != nil {
		return nil, "", "", nil, aerr
	}
	if root, aerr = openRoot(c); aerr != nil {
		return nil, "", "", nil, aerr
	}
	fi, err := root.Stat(rel)
	if err != nil {
		root.Close()
		return nil, "", "", nil, fsError(err)
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
		writeJSON(c.w, http.StatusOK, legacyList([]entry{{rel, fi}}))
		return nil
	}
	writeJSON(c.w, http.StatusOK, newFile(c, path.Base(rel), dir, fi))
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
	if !fi.Mode().IsRegular() {
		return badRequest("the path is not a file")
	}
	f, err := root.Open(rel)
	if err != nil {
		return fsError(err)
	}
	defer f.Close()
	c.w.Header().Set("Content-Type", contentType(rel))
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
		writeJSON(c.w, http.StatusOK, map[string]string{"message": "file deleted successfully"})
		return nil
	}
	c.w.WriteHeader(http.StatusNoContent)
	return nil
}
