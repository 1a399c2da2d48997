package azsessions

import (
	"bytes"
	"errors"
	"io"
	"mime"
	"mime/multipart"
	"strings"
	"testing"
)

// expectedPartFilename is what a server reads back as the filename of an
// upload of base: the name itself, with CR and LF percent-encoded (as
// browsers do, since a header cannot carry them).
func expectedPartFilename(base string) string {
	return strings.NewReplacer("\r", "%0D", "\n", "%0A").Replace(base)
}

// FuzzMultipartBody: for any file name UploadFile accepts and any content
// (read from any offset of the source), the multipart body parses back with
// mime/multipart to one part named "file" with the exact filename, content
// type and content; and reading it through new views and seeks, in any
// order the ops bytes dictate, gives the same bytes at every offset, while
// an abandoned view fails instead of reading.
func FuzzMultipartBody(f *testing.F) {
	f.Add("x.csv", []byte("a,b\n1,2\n"), uint8(0), "", []byte{0, 1, 2, 3})
	f.Add("my file #1 100%.csv", []byte{}, uint8(3), "text/csv", []byte{})
	f.Add(`quo"te\back.txt`, []byte("\r\n--boundary--\r\n"), uint8(1), "", []byte{7, 200, 13, 9, 4, 255})
	f.Add("données_温度.csv", bytes.Repeat([]byte{0, 1, 2, 255}, 300), uint8(17), "application/octet-stream", []byte{1, 1, 1, 2, 0, 3, 50, 6})
	f.Add("line\r\nbreak", []byte("x"), uint8(0), "", []byte{5, 5, 5})
	f.Add("%0D%0A", []byte("y"), uint8(0), "", []byte{})
	f.Add("tab\there", []byte("z"), uint8(0), "", []byte{})
	f.Add("ctl\x01char", []byte("z"), uint8(0), "", []byte{})
	f.Add("bad\xffutf8", []byte("z"), uint8(0), "", []byte{})
	f.Add(" lead and trail ", []byte("z"), uint8(0), "", []byte{})
	f.Add("del\x7f", []byte("z"), uint8(0), "", []byte{})
	f.Add("x.txt", []byte("z"), uint8(0), "text/plain\r\nX-Injected: 1", []byte{})
	f.Add("x.txt", []byte("z"), uint8(0), "text/plain; charset=\"utf-8\"", []byte{3, 0, 4, 9})
	f.Fuzz(func(t *testing.T, filename string, content []byte, prefix uint8, contentType string, ops []byte) {
		dir, base, err := splitFileName(filename)
		if err != nil || dir != "" {
			return // UploadFile refuses it (or splits off the directory) before any body is made
		}
		control := func(s string) bool { return strings.ContainsFunc(s, isControl) }
		if contentType != "" && !strings.ContainsAny(contentType, "\r\n") && !control(contentType) {
			if _, _, err := mime.ParseMediaType(contentType); err != nil {
				return // not a media type: the caller's mistake, sent verbatim
			}
		}
		src := bytes.NewReader(append(bytes.Repeat([]byte{'P'}, int(prefix)), content...))
		if _, err := src.Seek(int64(prefix), io.SeekStart); err != nil {
			t.Fatal(err)
		}
		b, err := newMultipartBody(src, base, contentType)
		switch {
		case control(base):
			if !errors.Is(err, ErrInvalidFileName) {
				t.Fatalf("filename %q with a control character: %v", base, err)
			}
			return
		case strings.ContainsAny(contentType, "\r\n") || control(contentType):
			if err == nil {
				t.Fatalf("content type %q with a control character accepted", contentType)
			}
			return
		case err != nil:
			t.Fatal(err)
		}
		if pos, _ := src.Seek(0, io.SeekCurrent); b.start != int64(prefix) || pos < 0 {
			t.Fatalf("start %d, want %d", b.start, prefix)
		}
		if b.contentSize != int64(len(content)) {
			t.Fatalf("contentSize %d, want %d", b.contentSize, len(content))
		}

		// 1. A full read parses back exactly.
		full, err := io.ReadAll(b.newView())
		if err != nil {
			t.Fatal(err)
		}
		if int64(len(full)) != b.size() {
			t.Fatalf("read %d bytes, size() says %d", len(full), b.size())
		}
		mt, params, err := mime.ParseMediaType(b.contentType())
		if err != nil || mt != "multipart/form-data" {
			t.Fatalf("content type %q: %v", b.contentType(), err)
		}
		mr := multipart.NewReader(bytes.NewReader(full), params["boundary"])
		part, err := mr.NextPart()
		if err != nil {
			t.Fatalf("filename %q: NextPart: %v\nbody head %q", base, err, b.head)
		}
		disp, dparams, err := mime.ParseMediaType(part.Header.Get("Content-Disposition"))
		if err != nil {
			t.Fatalf("filename %q: Content-Disposition %q: %v", base, part.Header.Get("Content-Disposition"), err)
		}
		if disp != "form-data" || dparams["name"] != "file" || part.FormName() != "file" {
			t.Fatalf("disposition %q params %q", disp, dparams)
		}
		if got, want := dparams["filename"], expectedPartFilename(base); got != want {
			t.Fatalf("filename %q parsed back as %q, want %q", base, got, want)
		}
		wantCT := contentType
		if wantCT == "" {
			wantCT = "application/octet-stream"
		}
		if got := part.Header.Get("Content-Type"); got != strings.TrimSpace(wantCT) {
			t.Fatalf("part Content-Type %q, want %q", got, wantCT)
		}
		got, err := io.ReadAll(part)
		if err != nil {
			t.Fatalf("part content: %v", err)
		}
		if !bytes.Equal(got, content) {
			t.Fatalf("content differs: got %d bytes, want %d", len(got), len(content))
		}
		if _, err := mr.NextPart(); err != io.EOF {
			t.Fatalf("a second part or a bad end: %v", err)
		}

		// 2. Views and seeks in arbitrary order read the same bytes.
		size := b.size()
		view := b.newView()
		var old []*bodyView
		for i := 0; i+1 < len(ops); i += 2 {
			op, arg := ops[i], int64(ops[i+1])
			switch op % 6 {
			case 0: // a new try: the previous view is abandoned
				old = append(old, view)
				view = b.newView()
			case 1, 2: // seek somewhere (absolute, relative or from the end)
				cur, _ := view.Seek(0, io.SeekCurrent)
				var want, pos int64
				var err error
				switch (op / 6) % 3 {
				case 0:
					want = arg * size / 256
					pos, err = view.Seek(want, io.SeekStart)
				case 1:
					want = cur + arg - 128
					pos, err = view.Seek(arg-128, io.SeekCurrent)
				default:
					want = size - arg*size/256 - arg%3
					pos, err = view.Seek(-arg*size/256-arg%3, io.SeekEnd)
				}
				if want < 0 {
					if err == nil {
						t.Fatalf("seek to %d succeeded", want)
					}
					continue
				}
				if err != nil || pos != want {
					t.Fatalf("seek to %d: %d, %v", want, pos, err)
				}
			case 3, 4: // read a chunk and compare with the full body at that offset
				at, _ := view.Seek(0, io.SeekCurrent)
				buf := make([]byte, int(arg)%97+1)
				n, err := view.Read(buf)
				if at >= size {
					if n != 0 || err != io.EOF {
						t.Fatalf("read at %d past the end (%d): %d, %v", at, size, n, err)
					}
					continue
				}
				if err != nil && err != io.EOF {
					t.Fatalf("read at %d: %v", at, err)
				}
				if n == 0 && err == nil {
					t.Fatalf("read at %d returned nothing", at)
				}
				if !bytes.Equal(buf[:n], full[at:at+int64(n)]) {
					t.Fatalf("read at %d: %q, want %q", at, buf[:n], full[at:at+int64(n)])
				}
			case 5: // an abandoned view never reads the source
				for _, o := range old {
					if _, err := o.Read(make([]byte, 8)); !errors.Is(err, errAbandonedTry) {
						t.Fatalf("abandoned view read: %v", err)
					}
				}
			}
		}
		// whatever happened before, the current view reads the whole body again
		if _, err := b.Seek(0, io.SeekStart); err != nil {
			t.Fatal(err)
		}
		again, err := io.ReadAll(b)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(again, full) {
			t.Fatalf("a re-read after seeks differs")
		}
	})
}
