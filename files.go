package azsessions

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"

	"github.com/azsessions/azsessions/internal/wire"
)

// DataDir is the directory of a session's files, where uploads land and code
// can read and write.
const DataDir = "/mnt/data"

// FileType says whether a File is a regular file or a directory.
type FileType string

// File types. The service spells them in several cases ("File", "file",
// "directory"); the client reports these two.
const (
	FileTypeFile      FileType = "file"
	FileTypeDirectory FileType = "directory"
)

// File describes a file or directory under /mnt/data.
type File struct {
	// Name is the base name, such as "TemperatureData.csv".
	Name string
	// Directory is the parent directory relative to /mnt/data, such as
	// "level1/level2", or "" for /mnt/data itself.
	Directory string
	// Type is FileTypeFile or FileTypeDirectory.
	Type FileType
	// ContentType is the media type the service reports (may be empty).
	ContentType string
	// SizeInBytes is the size in bytes.
	SizeInBytes int64
	// LastModifiedAt is the last modification time.
	LastModifiedAt time.Time
}

// IsDir reports whether f is a directory.
func (f File) IsDir() bool { return f.Type == FileTypeDirectory }

// FullPath returns the file's absolute path in the session, such as
// "/mnt/data/level1/TemperatureData.csv": the path code running in the session uses.
func (f File) FullPath() string { return path.Join(DataDir, f.Directory, f.Name) }

func fileFromWire(w wire.File, listed string) File {
	f := File{Name: w.Name, Directory: listed, Type: FileTypeFile, ContentType: w.ContentType, SizeInBytes: w.SizeInBytes, LastModifiedAt: w.LastModifiedAt}
	if wire.IsDirectoryType(w.Type) {
		f.Type = FileTypeDirectory
	}
	if w.Directory != nil {
		f.Directory = path.Join(listed, *w.Directory)
		if f.Directory == "." {
			f.Directory = ""
		}
	}
	return f
}

func fileFromLegacy(p wire.LegacyFileProps) File {
	name := strings.TrimPrefix(strings.TrimPrefix(p.Filename, DataDir), "/")
	dir, base := path.Split(name)
	return File{Name: base, Directory: strings.TrimSuffix(dir, "/"), Type: FileTypeFile, SizeInBytes: p.Size, LastModifiedAt: p.LastModifiedTime}
}

// splitFileName splits a file name given as "x.csv", "sub/dir/x.csv" or
// "/mnt/data/sub/x.csv" into the directory relative to /mnt/data and the base
// name. It rejects empty names, empty, "." and ".." segments, control
// characters, bytes that are not UTF-8 and absolute paths outside /mnt/data.
func splitFileName(name string) (dir, base string, err error) {
	rel, err := relativeDir(name)
	if err != nil {
		return "", "", err
	}
	if rel == "" {
		return "", "", fmt.Errorf("%w: %q names the data directory, not a file", ErrInvalidFileName, name)
	}
	dir, base = path.Split(rel)
	return strings.TrimSuffix(dir, "/"), base, nil
}

// relativeDir checks a path given as "sub/dir", "/mnt/data/sub/dir",
// "/mnt/data" or "" and returns it relative to /mnt/data.
func relativeDir(p string) (string, error) {
	rel := p
	if strings.HasPrefix(p, "/") {
		if p != DataDir && !strings.HasPrefix(p, DataDir+"/") {
			return "", fmt.Errorf("%w: %q is outside %s", ErrInvalidFileName, p, DataDir)
		}
		rel = strings.TrimPrefix(strings.TrimPrefix(p, DataDir), "/")
	}
	if rel == "" {
		return "", nil
	}
	if strings.ContainsFunc(rel, isControl) {
		return "", fmt.Errorf("%w: %q contains a control character", ErrInvalidFileName, p)
	}
	if !utf8.ValidString(rel) {
		// the service reads names as UTF-8 (multipart filename, JSON
		// listings): each bad byte would become U+FFFD, another file's name
		// (red-team finding, redcli)
		return "", fmt.Errorf("%w: %q is not valid UTF-8", ErrInvalidFileName, p)
	}
	for _, seg := range strings.Split(rel, "/") {
		switch seg {
		case "":
			return "", fmt.Errorf("%w: %q has an empty path segment", ErrInvalidFileName, p)
		case ".", "..":
			return "", fmt.Errorf("%w: %q has a %q segment", ErrInvalidFileName, p, seg)
		}
	}
	return rel, nil
}

// pathEscape escapes one path segment.
func pathEscape(s string) string { return url.PathEscape(s) }

// fileTarget checks the identifier and a file's name for the builders of
// the operations on one file (getFile, downloadFile, deleteFile) and returns
// the name's last element and the query that names its directory: path=dir
// on the executions contract; on the legacy one, which has no
// sub-directories, a name in one is refused (errSubdirectories).
func (s *Session) fileTarget(name string) (base string, q url.Values, err error) {
	if err := s.validate(); err != nil {
		return "", nil, err
	}
	dir, base, err := splitFileName(name)
	if err != nil {
		return "", nil, err
	}
	q = url.Values{}
	if dir != "" {
		if s.client.features.Legacy {
			return "", nil, s.client.errSubdirectories()
		}
		q.Set("path", dir)
	}
	return base, q, nil
}

// errSubdirectories is the refusal of a file name with a directory on the
// legacy api-versions (the builders of the file operations return it).
func (c *Client) errSubdirectories() error {
	return fmt.Errorf("%w: sub-directories need api-version %s or later (client uses %s)", ErrUnsupported, APIVersion20241002Preview, c.version)
}

// UploadFileOptions contains the optional parameters of Session.UploadFile.
type UploadFileOptions struct {
	// ContentType of the multipart file part; default application/octet-stream.
	ContentType string
}

// UploadFileResponse is the answer of Session.UploadFile.
type UploadFileResponse struct {
	File
}

// UploadFile uploads content as the file name under /mnt/data, replacing a
// file of that name. name may be "x.csv", "sub/dir/x.csv" or
// "/mnt/data/sub/x.csv"; sub-directories need the executions contract
// (2024-10-02-preview and later).
//
// REST: POST {endpoint}/files[?path=dir] (2024-10-02-preview and later) or
// POST {endpoint}/files/upload (legacy), a multipart/form-data body with one
// part named "file".
//
// The body streams from content, from its current offset to its end, and is
// never held in memory; content is rewound (Seek) for each retry, so it must
// not be changed during the call. Errors: ErrInvalidFileName or
// ErrUnsupported for the name, ErrFileTooLarge when the content is larger than
// MaxUploadBytes, all before any I/O; *azcore.ResponseError from the service
// (413 over the service's limit).
func (s *Session) UploadFile(ctx context.Context, name string, content io.ReadSeeker, options *UploadFileOptions) (UploadFileResponse, error) {
	const op = "Session.UploadFile"
	var err error
	ctx, end := s.client.startOp(ctx, op)
	defer func() { end(err) }()
	req, err := s.uploadFileCreateRequest(ctx, name, content, options)
	if err != nil {
		return UploadFileResponse{}, err
	}
	resp, err := s.client.do(req, http.StatusOK, http.StatusCreated, http.StatusAccepted)
	if err != nil {
		return UploadFileResponse{}, err
	}
	out, err := s.uploadFileHandleResponse(resp, name)
	return out, err
}

// uploadFileCreateRequest checks the arguments and builds POST
// {endpoint}/files[?path=dir] (legacy: POST {endpoint}/files/upload) with
// the streaming multipart body.
func (s *Session) uploadFileCreateRequest(ctx context.Context, name string, content io.ReadSeeker, options *UploadFileOptions) (*policy.Request, error) {
	if options == nil {
		options = &UploadFileOptions{}
	}
	if err := s.validate(); err != nil {
		return nil, err
	}
	if content == nil {
		return nil, errors.New("azsessions: content is nil")
	}
	dir, base, err := splitFileName(name)
	if err != nil {
		return nil, err
	}
	route, q := "files", url.Values{}
	if s.client.features.Legacy {
		if dir != "" {
			return nil, s.client.errSubdirectories()
		}
		route = "files/upload"
	} else if dir != "" {
		q.Set("path", dir)
	}
	body, err := newMultipartBody(content, base, options.ContentType)
	if err != nil {
		return nil, err
	}
	if body.contentSize > MaxUploadBytes {
		return nil, fmt.Errorf("%w: %d bytes is over the service's limit of %d bytes", ErrFileTooLarge, body.contentSize, MaxUploadBytes)
	}
	req, err := s.client.newRequest(ctx, http.MethodPost, route, s.identifier, q)
	if err != nil {
		return nil, err
	}
	if err := req.SetBody(body, body.contentType()); err != nil {
		return nil, err
	}
	req.SetOperationValue(body)
	return req, nil
}

// uploadFileHandleResponse decodes the uploaded file's description (legacy:
// the first entry of a file list).
func (s *Session) uploadFileHandleResponse(resp *http.Response, name string) (UploadFileResponse, error) {
	if s.client.features.Legacy {
		var w wire.LegacyFileList
		if err := runtime.UnmarshalAsJSON(resp, &w); err != nil {
			return UploadFileResponse{}, err
		}
		if len(w.Value) == 0 {
			return UploadFileResponse{}, errors.New("azsessions: the upload answer lists no file")
		}
		return UploadFileResponse{File: fileFromLegacy(w.Value[0].Properties)}, nil
	}
	var w wire.File
	if err := runtime.UnmarshalAsJSON(resp, &w); err != nil {
		return UploadFileResponse{}, err
	}
	dir, base, _ := splitFileName(name)
	f := fileFromWire(w, dir)
	if f.Name == "" {
		f.Name = base
	}
	return UploadFileResponse{File: f}, nil
}

// multipartBody is a multipart/form-data body with one part named "file" that
// streams from the caller's io.ReadSeeker. Each try of the retry policy reads
// through its own view (uploadBodyPolicy), and reads from the view of an
// abandoned try fail, so two tries can never read the source at once (net/http
// may still be writing the previous try's body after RoundTrip returned).
type multipartBody struct {
	mu          sync.Mutex
	src         io.ReadSeeker
	start       int64 // offset of the content in src
	contentSize int64
	head, tail  []byte
	ctype       string // the body's Content-Type, with the boundary
	gen         int    // generation of the current view
	srcPos      int64  // src's position relative to start, or -1 when unknown
	cur         *bodyView
}

func newMultipartBody(src io.ReadSeeker, filename, contentType string) (*multipartBody, error) {
	// A part header cannot carry control characters: servers refuse the
	// whole body, and a line break would inject headers. (splitFileName has
	// already refused them in names; this guards the header itself.)
	if strings.ContainsFunc(filename, isControl) {
		return nil, fmt.Errorf("%w: %q contains a control character", ErrInvalidFileName, filename)
	}
	if strings.ContainsFunc(contentType, isControl) {
		return nil, fmt.Errorf("azsessions: content type %q contains a control character", contentType)
	}
	start, err := src.Seek(0, io.SeekCurrent)
	if err != nil {
		return nil, fmt.Errorf("azsessions: content is not seekable: %w", err)
	}
	endOff, err := src.Seek(0, io.SeekEnd)
	if err != nil {
		return nil, fmt.Errorf("azsessions: content is not seekable: %w", err)
	}
	if contentType == "" {
		contentType = "application/octet-stream"
	}
	// The part's head and the body's tail come from mime/multipart (a random
	// boundary, quoting of the file name); the content streams between them.
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	part := textproto.MIMEHeader{}
	part.Set("Content-Disposition", multipart.FileContentDisposition("file", filename))
	part.Set("Content-Type", contentType)
	if _, err := mw.CreatePart(part); err != nil {
		return nil, err
	}
	headLen := buf.Len()
	if err := mw.Close(); err != nil {
		return nil, err
	}
	b := &multipartBody{src: src, start: start, contentSize: endOff - start, ctype: mw.FormDataContentType(), srcPos: -1}
	b.head, b.tail = buf.Bytes()[:headLen:headLen], buf.Bytes()[headLen:]
	b.cur = &bodyView{b: b}
	return b, nil
}

// isControl reports whether r is an ASCII control character (including tab,
// CR and LF) or DEL: none may stand in a file name or a part header.
func isControl(r rune) bool { return r < 0x20 || r == 0x7f }

func (b *multipartBody) contentType() string { return b.ctype }

func (b *multipartBody) size() int64 { return int64(len(b.head)) + b.contentSize + int64(len(b.tail)) }

// newView starts a new generation: earlier views fail from now on.
func (b *multipartBody) newView() *bodyView {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.gen++
	b.cur = &bodyView{b: b, gen: b.gen}
	return b.cur
}

// Read, Seek and Close make multipartBody the io.ReadSeekCloser azcore wants;
// they act on the current view.
func (b *multipartBody) Read(p []byte) (int, error) {
	b.mu.Lock()
	v := b.cur
	b.mu.Unlock()
	return v.Read(p)
}

func (b *multipartBody) Seek(offset int64, whence int) (int64, error) {
	b.mu.Lock()
	v := b.cur
	b.mu.Unlock()
	return v.Seek(offset, whence)
}

func (b *multipartBody) Close() error { return nil }

var errAbandonedTry = errors.New("azsessions: upload body read by an abandoned try")

// bodyView is one try's reader over a multipartBody.
type bodyView struct {
	b   *multipartBody
	gen int
	off int64
}

func (v *bodyView) Read(p []byte) (int, error) {
	b := v.b
	b.mu.Lock()
	defer b.mu.Unlock()
	if v.gen != b.gen {
		return 0, errAbandonedTry
	}
	total := b.size()
	if v.off >= total {
		return 0, io.EOF
	}
	headLen := int64(len(b.head))
	switch {
	case v.off < headLen:
		n := copy(p, b.head[v.off:])
		v.off += int64(n)
		return n, nil
	case v.off < headLen+b.contentSize:
		rel := v.off - headLen
		if b.srcPos != rel {
			if _, err := b.src.Seek(b.start+rel, io.SeekStart); err != nil {
				b.srcPos = -1
				return 0, err
			}
			b.srcPos = rel
		}
		if remain := b.contentSize - rel; int64(len(p)) > remain {
			p = p[:remain]
		}
		n, err := b.src.Read(p)
		b.srcPos += int64(n)
		v.off += int64(n)
		if err == io.EOF {
			if v.off < headLen+b.contentSize {
				return n, io.ErrUnexpectedEOF // the source shrank
			}
			err = nil
		}
		return n, err
	default:
		n := copy(p, b.tail[v.off-headLen-b.contentSize:])
		v.off += int64(n)
		return n, nil
	}
}

func (v *bodyView) Seek(offset int64, whence int) (int64, error) {
	b := v.b
	b.mu.Lock()
	defer b.mu.Unlock()
	var abs int64
	switch whence {
	case io.SeekStart:
		abs = offset
	case io.SeekCurrent:
		abs = v.off + offset
	case io.SeekEnd:
		abs = b.size() + offset
	default:
		return 0, errors.New("azsessions: invalid whence")
	}
	if abs < 0 {
		return 0, errors.New("azsessions: negative position")
	}
	v.off = abs
	return abs, nil
}

func (v *bodyView) Close() error { return nil }

// uploadBodyPolicy gives each try of an upload its own view of the multipart
// body (see multipartBody). It sits in the PerRetry stage.
type uploadBodyPolicy struct{}

func (uploadBodyPolicy) Do(req *policy.Request) (*http.Response, error) {
	if !strings.HasPrefix(req.Raw().Header.Get("Content-Type"), "multipart/") {
		return req.Next()
	}
	var body *multipartBody
	if req.OperationValue(&body) && body != nil {
		req.Raw().Body = body.newView()
		req.Raw().GetBody = nil
	}
	return req.Next()
}

// ListFilesOptions contains the optional parameters of Session.NewListFilesPager.
type ListFilesOptions struct {
	// Path is the directory to list, relative ("sub/dir") or absolute
	// ("/mnt/data/sub/dir"); empty means /mnt/data. Needs the executions
	// contract (2024-10-02-preview and later).
	Path string
	// Recursive lists sub-directories too (2025-10-02-preview only).
	Recursive bool
}

// ListFilesResponse is one page of Session.NewListFilesPager.
type ListFilesResponse struct {
	// Files of this page: files and, on the executions contract, directories.
	Files []File
	// NextLink is the URL of the next page, or "" on the last page.
	NextLink string
}

// NewListFilesPager lists the session's files: GET {endpoint}/files
// [?path=dir][&recursive=true] (2024-10-02-preview and later) or the legacy
// GET {endpoint}/files, following nextLink. It does no I/O until NextPage;
// invalid options (ErrInvalidFileName, ErrUnsupported) and the identifier
// (ErrInvalidIdentifier) are reported by the first NextPage before any I/O.
func (s *Session) NewListFilesPager(options *ListFilesOptions) *runtime.Pager[ListFilesResponse] {
	const op = "Session.NewListFilesPager"
	if options == nil {
		options = &ListFilesOptions{}
	}
	guard := &linkGuard{}
	// listed is the directory the first page asked for (listFilesCreateRequest
	// checked it): the later pages (nextLink) list the same one, whatever the
	// caller does to *options meanwhile (red-team finding, redcli)
	var listed string
	return runtime.NewPager(runtime.PagingHandler[ListFilesResponse]{
		More: func(page ListFilesResponse) bool { return page.NextLink != "" },
		Fetcher: func(ctx context.Context, page *ListFilesResponse) (ListFilesResponse, error) {
			ctx = context.WithValue(ctx, runtime.CtxAPINameKey{}, op)
			var nextLink string
			if page != nil {
				nextLink = page.NextLink
			}
			if err := guard.next(nextLink); err != nil {
				return ListFilesResponse{}, err
			}
			resp, err := runtime.FetcherForNextLink(ctx, s.client.internal.Pipeline(), nextLink, func(ctx context.Context) (*policy.Request, error) {
				req, dir, err := s.listFilesCreateRequest(ctx, options)
				listed = dir
				return req, err
			}, s.client.nextPageOptions(s.identifier))
			if err != nil {
				return ListFilesResponse{}, wrapAuthError(err)
			}
			return s.listFilesHandleResponse(resp, listed)
		},
		Tracer: s.client.internal.Tracer(),
	})
}

// listFilesCreateRequest checks the identifier and the options (before any
// I/O: the first page's Fetcher calls it before sending anything) and builds
// the first page's GET {endpoint}/files[?path=dir][&recursive=true] (the
// legacy route is the same without the parameters, which it refuses); dir is
// the directory listed, relative to /mnt/data.
func (s *Session) listFilesCreateRequest(ctx context.Context, options *ListFilesOptions) (_ *policy.Request, dir string, _ error) {
	if err := s.validate(); err != nil {
		return nil, "", err
	}
	dir, err := relativeDir(options.Path)
	if err != nil {
		return nil, "", err
	}
	if s.client.features.Legacy && dir != "" {
		return nil, "", fmt.Errorf("%w: ListFilesOptions.Path needs api-version %s or later (client uses %s)", ErrUnsupported, APIVersion20241002Preview, s.client.version)
	}
	if options.Recursive && !s.client.features.Recursive {
		return nil, "", fmt.Errorf("%w: ListFilesOptions.Recursive needs api-version %s (client uses %s)", ErrUnsupported, APIVersion20251002Preview, s.client.version)
	}
	q := url.Values{}
	if dir != "" {
		q.Set("path", dir)
	}
	if options.Recursive {
		q.Set("recursive", "true")
	}
	req, err := s.client.newRequest(ctx, http.MethodGet, "files", s.identifier, q)
	return req, dir, err
}

// listFilesHandleResponse decodes one page: {"value":[File...],"nextLink"}
// or, legacy, {"value":[{"properties":...}]} (one page).
func (s *Session) listFilesHandleResponse(resp *http.Response, dir string) (ListFilesResponse, error) {
	if err := checkPageEntries(resp); err != nil {
		return ListFilesResponse{}, err
	}
	if s.client.features.Legacy {
		var w wire.LegacyFileList
		if err := runtime.UnmarshalAsJSON(resp, &w); err != nil {
			return ListFilesResponse{}, err
		}
		out := ListFilesResponse{Files: make([]File, 0, len(w.Value))}
		for _, e := range w.Value {
			out.Files = append(out.Files, fileFromLegacy(e.Properties))
		}
		return out, nil
	}
	var w wire.FileList
	if err := runtime.UnmarshalAsJSON(resp, &w); err != nil {
		return ListFilesResponse{}, err
	}
	out := ListFilesResponse{Files: make([]File, 0, len(w.Value))}
	for _, f := range w.Value {
		out.Files = append(out.Files, fileFromWire(f, dir))
	}
	if w.NextLink != nil {
		out.NextLink = *w.NextLink
	}
	return out, nil
}

// GetFileOptions contains the optional parameters of Session.GetFile.
type GetFileOptions struct {
	// for future use
}

// GetFileResponse is the answer of Session.GetFile.
type GetFileResponse struct {
	File
}

// GetFile returns one file's metadata: GET {endpoint}/files/{name}[?path=dir]
// (2024-10-02-preview and later) or the legacy GET {endpoint}/files/{name}.
// name is as for UploadFile. A missing file gives an *azcore.ResponseError
// with status 404.
func (s *Session) GetFile(ctx context.Context, name string, options *GetFileOptions) (GetFileResponse, error) {
	const op = "Session.GetFile"
	var err error
	ctx, end := s.client.startOp(ctx, op)
	defer func() { end(err) }()
	req, err := s.getFileCreateRequest(ctx, name)
	if err != nil {
		return GetFileResponse{}, err
	}
	resp, err := s.client.do(req, http.StatusOK)
	if err != nil {
		return GetFileResponse{}, err
	}
	out, err := s.getFileHandleResponse(resp, name)
	return out, err
}

// getFileCreateRequest checks the identifier and the name and builds GET
// {endpoint}/files/{name}[?path=dir] (legacy: no sub-directories, no path).
func (s *Session) getFileCreateRequest(ctx context.Context, name string) (*policy.Request, error) {
	base, q, err := s.fileTarget(name)
	if err != nil {
		return nil, err
	}
	return s.client.newRequest(ctx, http.MethodGet, "files/"+pathEscape(base), s.identifier, q)
}

// getFileHandleResponse decodes the file's description (legacy: the first
// entry of a file list).
func (s *Session) getFileHandleResponse(resp *http.Response, name string) (GetFileResponse, error) {
	if s.client.features.Legacy {
		var w wire.LegacyFileList
		if err := runtime.UnmarshalAsJSON(resp, &w); err != nil {
			return GetFileResponse{}, err
		}
		if len(w.Value) == 0 {
			return GetFileResponse{}, errors.New("azsessions: the answer lists no file")
		}
		return GetFileResponse{File: fileFromLegacy(w.Value[0].Properties)}, nil
	}
	var w wire.File
	if err := runtime.UnmarshalAsJSON(resp, &w); err != nil {
		return GetFileResponse{}, err
	}
	dir, _, _ := splitFileName(name)
	return GetFileResponse{File: fileFromWire(w, dir)}, nil
}

// DownloadFileOptions contains the optional parameters of Session.DownloadFile.
type DownloadFileOptions struct {
	// for future use
}

// DownloadFileResponse is the answer of Session.DownloadFile. The caller must
// close Body.
type DownloadFileResponse struct {
	// Body streams the file's bytes.
	Body io.ReadCloser
	// ContentLength in bytes, or -1 when the service did not say.
	ContentLength int64
	// ContentType the service reported.
	ContentType string
}

// DownloadFile streams a file's content: GET
// {endpoint}/files/{name}/content[?path=dir] (2024-10-02-preview and later)
// or the legacy GET {endpoint}/files/content/{name}. name is as for
// UploadFile. The body is not buffered: read it and close it. A missing file
// gives an *azcore.ResponseError with status 404. See DownloadFileToPath for
// saving to disk safely.
//
// A body cut short is detected by a read error when the service sent a
// Content-Length (ContentLength >= 0). When it did not (a body framed by
// the connection's close), a cut body looks complete to Body's reader:
// compare the bytes read with GetFile's SizeInBytes, as DownloadFileToPath
// does.
func (s *Session) DownloadFile(ctx context.Context, name string, options *DownloadFileOptions) (DownloadFileResponse, error) {
	const op = "Session.DownloadFile"
	var err error
	ctx, end := s.client.startOp(ctx, op)
	defer func() { end(err) }()
	req, err := s.downloadFileCreateRequest(ctx, name)
	if err != nil {
		return DownloadFileResponse{}, err
	}
	resp, err := s.client.do(req, http.StatusOK)
	if err != nil {
		return DownloadFileResponse{}, err
	}
	return DownloadFileResponse{Body: resp.Body, ContentLength: resp.ContentLength, ContentType: resp.Header.Get("Content-Type")}, nil
}

// downloadFileCreateRequest checks the identifier and the name and builds
// GET {endpoint}/files/{name}/content[?path=dir] (legacy: GET
// {endpoint}/files/content/{name}, no sub-directories), whose 2xx body is
// streamed to the caller, not read by the pipeline nor capped.
func (s *Session) downloadFileCreateRequest(ctx context.Context, name string) (*policy.Request, error) {
	base, q, err := s.fileTarget(name)
	if err != nil {
		return nil, err
	}
	route := "files/" + pathEscape(base) + "/content"
	if s.client.features.Legacy {
		route = "files/content/" + pathEscape(base)
	}
	req, err := s.client.newRequest(context.WithValue(ctx, streamKey{}, true), http.MethodGet, route, s.identifier, q)
	if err != nil {
		return nil, err
	}
	req.Raw().Header.Set("Accept", "*/*")
	runtime.SkipBodyDownload(req)
	return req, nil
}

// DownloadFileToPathOptions contains the optional parameters of Session.DownloadFileToPath.
type DownloadFileToPathOptions struct {
	// Overwrite replaces an existing file at the local path. Without it an
	// existing file is an error matching os.ErrExist and is left untouched.
	Overwrite bool
	// Perm is the new file's mode; default 0o644.
	Perm os.FileMode
}

// DownloadFileToPathResponse is the answer of Session.DownloadFileToPath.
type DownloadFileToPathResponse struct {
	// Path is the local file written.
	Path string
	// Size is the number of bytes written.
	Size int64
	// ContentType the service reported.
	ContentType string
}

// DownloadFileToPath downloads the file name (as for DownloadFile) to
// localPath atomically: the bytes go to a temporary file in the same
// directory, which is synced and renamed over localPath only when the whole
// body arrived (its length checked against Content-Length, or, when the
// service sent none, against GetFile's SizeInBytes, one more request). On
// any failure the temporary file is removed and localPath keeps its
// previous content. An existing localPath is not replaced unless
// DownloadFileToPathOptions.Overwrite is set: without it the call fails
// before any I/O with an error matching os.ErrExist. A localPath that is a
// directory, or in a directory that cannot be written, fails before any I/O
// too.
func (s *Session) DownloadFileToPath(ctx context.Context, name, localPath string, options *DownloadFileToPathOptions) (DownloadFileToPathResponse, error) {
	if options == nil {
		options = &DownloadFileToPathOptions{}
	}
	if localPath == "" {
		return DownloadFileToPathResponse{}, errors.New("azsessions: local path is empty")
	}
	perm := options.Perm
	if perm == 0 {
		perm = 0o644
	}
	if fi, err := os.Lstat(localPath); err == nil {
		if fi.IsDir() {
			// not even Overwrite replaces a directory (the rename fails)
			return DownloadFileToPathResponse{}, fmt.Errorf("azsessions: %s is a directory", localPath)
		}
		if !options.Overwrite {
			return DownloadFileToPathResponse{}, fmt.Errorf("azsessions: %s: %w (set DownloadFileToPathOptions.Overwrite to replace it)", localPath, os.ErrExist)
		}
	}
	// The local file is made before the download is asked for, so that a
	// local path that cannot be written (no such directory, no permission)
	// fails before any I/O (red-team finding, redcli).
	tmp, err := os.CreateTemp(filepath.Dir(localPath), "."+filepath.Base(localPath)+".*.part")
	if err != nil {
		return DownloadFileToPathResponse{}, err
	}
	ok := false
	defer func() {
		if !ok {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	resp, err := s.DownloadFile(ctx, name, nil)
	if err != nil {
		return DownloadFileToPathResponse{}, err
	}
	defer resp.Body.Close()
	n, err := io.Copy(tmp, resp.Body)
	if err != nil {
		return DownloadFileToPathResponse{}, fmt.Errorf("azsessions: download interrupted after %d bytes: %w", n, err)
	}
	if resp.ContentLength >= 0 && n != resp.ContentLength {
		return DownloadFileToPathResponse{}, fmt.Errorf("azsessions: download incomplete: got %d of %s bytes", n, strconv.FormatInt(resp.ContentLength, 10))
	}
	if resp.ContentLength < 0 {
		// no Content-Length: a cut body ended like a whole one; compare
		// with the size the service reports for the file
		info, err := s.GetFile(ctx, name, nil)
		if err != nil {
			return DownloadFileToPathResponse{}, fmt.Errorf("azsessions: download of unknown length: checking its size: %w", err)
		}
		if info.SizeInBytes != n {
			return DownloadFileToPathResponse{}, fmt.Errorf("azsessions: download incomplete: got %d of %d bytes", n, info.SizeInBytes)
		}
	}
	if err = tmp.Chmod(perm); err != nil {
		return DownloadFileToPathResponse{}, err
	}
	if err = tmp.Sync(); err != nil {
		return DownloadFileToPathResponse{}, err
	}
	if err = tmp.Close(); err != nil {
		return DownloadFileToPathResponse{}, err
	}
	if options.Overwrite {
		err = os.Rename(tmp.Name(), localPath)
	} else {
		// link fails if localPath appeared meanwhile: never overwrite silently
		if err = os.Link(tmp.Name(), localPath); err == nil {
			os.Remove(tmp.Name())
		}
	}
	if err != nil {
		return DownloadFileToPathResponse{}, err
	}
	ok = true
	return DownloadFileToPathResponse{Path: localPath, Size: n, ContentType: resp.ContentType}, nil
}

// DeleteFileOptions contains the optional parameters of Session.DeleteFile.
type DeleteFileOptions struct {
	// for future use
}

// DeleteFileResponse is the answer of Session.DeleteFile.
type DeleteFileResponse struct {
	// for future use
}

// DeleteFile deletes a file (or a directory, see below): DELETE
// {endpoint}/files/{name}[?path=dir] (204; 2024-10-02-preview and later) or
// the legacy DELETE {endpoint}/files/{name} (200). name is as for
// UploadFile. A missing file gives an *azcore.ResponseError with status 404.
//
// The route does not tell files from directories: when name is a directory
// the emulator deletes it with everything in it, and the service's
// behaviour is not documented. To delete only a file, check first with
// GetFile (File.IsDir).
func (s *Session) DeleteFile(ctx context.Context, name string, options *DeleteFileOptions) (DeleteFileResponse, error) {
	const op = "Session.DeleteFile"
	var err error
	ctx, end := s.client.startOp(ctx, op)
	defer func() { end(err) }()
	req, err := s.deleteFileCreateRequest(ctx, name)
	if err != nil {
		return DeleteFileResponse{}, err
	}
	resp, err := s.client.do(req, http.StatusOK, http.StatusNoContent)
	if err != nil {
		return DeleteFileResponse{}, err
	}
	runtime.Drain(resp)
	return DeleteFileResponse{}, nil
}

// deleteFileCreateRequest checks the identifier and the name and builds
// DELETE {endpoint}/files/{name}[?path=dir] (legacy: no sub-directories, no
// path).
func (s *Session) deleteFileCreateRequest(ctx context.Context, name string) (*policy.Request, error) {
	base, q, err := s.fileTarget(name)
	if err != nil {
		return nil, err
	}
	return s.client.newRequest(ctx, http.MethodDelete, "files/"+pathEscape(base), s.identifier, q)
}

// UploadFileFromPathOptions contains the optional parameters of
// Session.UploadFileFromPath.
type UploadFileFromPathOptions struct {
	// ContentType of the multipart file part; default application/octet-stream.
	ContentType string
}

// UploadFileFromPath uploads the local file localPath as the file name
// under /mnt/data (as for UploadFile; an empty name means localPath's base
// name). It is UploadFile with the file opened for the caller: the same
// REST call (POST {endpoint}/files, or files/upload on the legacy
// api-versions), streamed from disk and never held in memory. Errors: an
// empty localPath, a directory or another non-regular file, and the errors
// of os.Open, before any I/O with the service; then those of UploadFile
// (ErrFileTooLarge over MaxUploadBytes, also before any I/O).
func (s *Session) UploadFileFromPath(ctx context.Context, name, localPath string, options *UploadFileFromPathOptions) (UploadFileResponse, error) {
	if options == nil {
		options = &UploadFileFromPathOptions{}
	}
	if localPath == "" {
		return UploadFileResponse{}, errors.New("azsessions: local path is empty")
	}
	if name == "" {
		name = filepath.Base(localPath)
	}
	f, err := os.Open(localPath)
	if err != nil {
		return UploadFileResponse{}, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return UploadFileResponse{}, err
	}
	if !info.Mode().IsRegular() {
		return UploadFileResponse{}, fmt.Errorf("azsessions: %s is not a regular file (%s)", localPath, info.Mode().Type())
	}
	return s.UploadFile(ctx, name, f, &UploadFileOptions{ContentType: options.ContentType})
}

// Files returns an iterator over the session's files, for range-over-func:
//
//	for f, err := range session.Files(ctx, nil) {
//		if err != nil {
//			return err
//		}
//		fmt.Println(f.FullPath())
//	}
//
// It walks NewListFilesPager (the same REST call and errors), fetching a
// page when the previous one is used up. A failure is yielded once, with a
// zero File, and ends the iteration. Breaking out of the loop stops it
// without another request.
func (s *Session) Files(ctx context.Context, options *ListFilesOptions) iter.Seq2[File, error] {
	return pagerItems(ctx, s.NewListFilesPager(options), func(p ListFilesResponse) []File { return p.Files })
}

// pagerItems iterates over the items of every page of pager.
func pagerItems[P, T any](ctx context.Context, pager *runtime.Pager[P], items func(P) []T) iter.Seq2[T, error] {
	return func(yield func(T, error) bool) {
		for pager.More() {
			page, err := pager.NextPage(ctx)
			if err != nil {
				var zero T
				yield(zero, err)
				return
			}
			for _, item := range items(page) {
				if !yield(item, nil) {
					return
				}
			}
		}
	}
}
