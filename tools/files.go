package tools

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/azsessions/azsessions"
)

// fileAnswer describes a file in the session, as LlamaIndex's RemoteFileMetadata.
type fileAnswer struct {
	Filename     string `json:"filename"`
	SizeInBytes  int64  `json:"size_in_bytes"`
	FileFullPath string `json:"file_full_path"`
	IsDirectory  bool   `json:"is_directory,omitempty"`
}

func newFileAnswer(f azsessions.File) fileAnswer {
	return fileAnswer{Filename: f.Name, SizeInBytes: f.SizeInBytes, FileFullPath: f.FullPath(), IsDirectory: f.IsDir()}
}

func (ts *toolset) listFiles(ctx context.Context, arguments string) (string, error) {
	if _, aerr := decodeArgs[listFilesArgs](arguments); aerr != nil {
		return aerr.msg, nil
	}
	files := []fileAnswer{}
	pager := ts.session.NewListFilesPager(nil)
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			return "", serviceError(err)
		}
		for _, f := range page.Files {
			files = append(files, newFileAnswer(f))
		}
	}
	return marshal(files), nil
}

func (ts *toolset) uploadFile(ctx context.Context, arguments string) (string, error) {
	args, aerr := decodeArgs[uploadFileArgs](arguments)
	if aerr != nil {
		return aerr.msg, nil
	}
	local := args.LocalFilePath
	rel, msg := ts.localRel(local)
	if msg != "" {
		return modelError("%s", msg), nil
	}
	root, err := os.OpenRoot(ts.opts.LocalDir)
	if err != nil {
		return "", &Error{Message: "the local directory is not available", Err: err}
	}
	defer root.Close()
	f, err := root.Open(rel)
	if err != nil {
		return modelError("%s", localOpenError(local, err)), nil
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return modelError("cannot read local file %q", local), nil
	}
	if !fi.Mode().IsRegular() {
		return modelError("local path %q is not a regular file", local), nil
	}
	remote := args.RemoteFileName
	if remote == "" {
		remote = filepath.Base(rel)
	}
	resp, err := ts.session.UploadFile(ctx, remote, f, nil)
	switch {
	case errors.Is(err, azsessions.ErrInvalidFileName):
		return modelError("invalid remote_file_name %q: use a file name such as \"data.csv\" (optionally under a sub-directory, never \"..\" or a path outside /mnt/data)", remote), nil
	case errors.Is(err, azsessions.ErrFileTooLarge):
		return modelError("local file %q is larger than the service's upload limit of %d bytes", local, azsessions.MaxUploadBytes), nil
	case errors.Is(err, azsessions.ErrUnsupported):
		return modelError("remote_file_name %q: sub-directories are not supported by this session; use a plain file name", remote), nil
	case err != nil:
		return "", serviceError(err)
	}
	return marshal(newFileAnswer(resp.File)), nil
}

// downloadAnswer is the answer of download_file.
type downloadAnswer struct {
	RemoteFilePath string `json:"remote_file_path"`
	SavedTo        string `json:"saved_to"`
	SizeInBytes    int64  `json:"size_in_bytes"`
	Note           string `json:"note,omitempty"`
}

func (ts *toolset) downloadFile(ctx context.Context, arguments string) (string, error) {
	args, aerr := decodeArgs[downloadFileArgs](arguments)
	if aerr != nil {
		return aerr.msg, nil
	}
	remote := args.RemoteFilePath
	if remote == "" || strings.HasSuffix(remote, "/") {
		return modelError("invalid remote_file_path %q: name a file such as \"data.csv\" or \"/mnt/data/data.csv\"", remote), nil
	}
	remoteBase := path.Base(remote)
	local := args.LocalFilePath
	if local == "" {
		local = remoteBase
	}
	rel, msg := ts.localRel(local)
	if msg != "" {
		return modelError("%s", msg), nil
	}
	root, err := os.OpenRoot(ts.opts.LocalDir)
	if err != nil {
		return "", &Error{Message: "the local directory is not available", Err: err}
	}
	defer root.Close()
	// A local path naming an existing directory saves inside it.
	if fi, err := root.Stat(rel); err == nil && fi.IsDir() {
		rel = filepath.Join(rel, remoteBase)
	}
	dirRel, base := filepath.Split(rel)
	if dirRel != "" {
		if err := root.MkdirAll(dirRel, 0o755); err != nil {
			return modelError("%s", localOpenError(local, err)), nil
		}
	}
	realDir, msg := ts.realDir(dirRel)
	if msg != "" {
		return modelError("local_file_path %q: %s", local, msg), nil
	}
	for i := 0; i < 1000; i++ {
		name := candidateName(base, i)
		if _, err := os.Lstat(filepath.Join(realDir, name)); err == nil {
			continue
		}
		resp, err := ts.session.DownloadFileToPath(ctx, remote, filepath.Join(realDir, name), nil)
		switch {
		case errors.Is(err, fs.ErrExist):
			continue // taken meanwhile
		case errors.Is(err, azsessions.ErrInvalidFileName), errors.Is(err, azsessions.ErrUnsupported):
			return modelError("invalid remote_file_path %q: name a file under /mnt/data such as \"data.csv\" or \"/mnt/data/data.csv\"", remote), nil
		case isNotFound(err):
			return modelError("remote file %q not found in /mnt/data (use list_files)", remote), nil
		case err != nil:
			return "", serviceError(err)
		}
		savedRel := filepath.ToSlash(filepath.Join(dirRel, name))
		ans := downloadAnswer{RemoteFilePath: remotePath(remote), SavedTo: savedRel, SizeInBytes: resp.Size}
		if i > 0 {
			ans.Note = fmt.Sprintf("%s already existed in the local directory, so the file was saved as %s instead (nothing was overwritten)", filepath.ToSlash(rel), savedRel)
		}
		return marshal(ans), nil
	}
	return modelError("local_file_path %q: no free file name found", local), nil
}

// remotePath returns the absolute path of a remote file name.
func remotePath(name string) string {
	if strings.HasPrefix(name, "/") {
		return name
	}
	return path.Join(azsessions.DataDir, name)
}

// candidateName returns base for i == 0, else base with "-i" before its extension.
func candidateName(base string, i int) string {
	if i == 0 {
		return base
	}
	ext := filepath.Ext(base)
	stem := strings.TrimSuffix(base, ext)
	if stem == "" { // ".bashrc"
		stem, ext = base, ""
	}
	return stem + "-" + strconv.Itoa(i) + ext
}

// localRel checks a local path given by the model and returns it relative to
// LocalDir. msg, when not empty, is the refusal for the model.
func (ts *toolset) localRel(p string) (rel, msg string) {
	if p == "" {
		return "", "local_file_path is empty"
	}
	if strings.ContainsRune(p, 0) {
		return "", fmt.Sprintf("local path %q contains a NUL byte", p)
	}
	for _, seg := range strings.FieldsFunc(p, func(r rune) bool { return r == '/' || r == filepath.Separator }) {
		if seg == ".." {
			return "", fmt.Sprintf("local path %q is refused: \"..\" is not allowed; use a path inside the local directory", p)
		}
	}
	outside := fmt.Sprintf("local path %q is refused: it is outside the local directory; use a path relative to it", p)
	if filepath.IsAbs(p) {
		p = filepath.Clean(p)
		rel, ok := "", false
		if base, err := filepath.Abs(ts.opts.LocalDir); err == nil {
			rel, ok = within(base, p)
			if !ok {
				if real, err := filepath.EvalSymlinks(base); err == nil {
					rel, ok = within(real, p)
				}
			}
		}
		if !ok {
			return "", outside
		}
		p = rel
	}
	p = filepath.Clean(p)
	if p == "." {
		return "", fmt.Sprintf("local path %q names the local directory itself, not a file", p)
	}
	if !filepath.IsLocal(p) {
		return "", outside
	}
	return p, ""
}

// within returns p relative to dir when p is dir or inside it.
func within(dir, p string) (string, bool) {
	rel, err := filepath.Rel(dir, p)
	if err != nil || !filepath.IsLocal(rel) {
		return "", false
	}
	return rel, true
}

// realDir resolves the directory dirRel (relative to LocalDir, existing) with
// its symbolic links and checks that it is still inside LocalDir.
func (ts *toolset) realDir(dirRel string) (string, string) {
	base, err := filepath.Abs(ts.opts.LocalDir)
	if err == nil {
		base, err = filepath.EvalSymlinks(base)
	}
	if err != nil {
		return "", "the local directory is not available"
	}
	real, err := filepath.EvalSymlinks(filepath.Join(base, dirRel))
	if err != nil {
		return "", "its directory cannot be resolved"
	}
	if real != base {
		if _, ok := within(base, real); !ok {
			return "", "refused: a symbolic link leads outside the local directory"
		}
	}
	return real, ""
}

// localOpenError explains why a local path could not be opened inside LocalDir.
func localOpenError(p string, err error) string {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Sprintf("local file %q not found in the local directory", p)
	case strings.Contains(err.Error(), "escapes"):
		return fmt.Sprintf("local path %q is refused: a symbolic link leads outside the local directory", p)
	case errors.Is(err, fs.ErrPermission):
		return fmt.Sprintf("local path %q: permission denied", p)
	}
	return fmt.Sprintf("local path %q cannot be used", p)
}
