package emulator_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/textproto"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/azsessions/azsessions/internal/uuid"
)

// peerCapture is one file of testdata/peers: what a third-party client of the
// service sends and what it reads from the answers, written down from its
// public source (the source URLs and commits are in the file); the clients'
// code is not in this repository.
type peerCapture struct {
	Client string `json:"client"`
	Source []struct {
		Repo, Path, Commit, URL string
	} `json:"source"`
	Notes []string   `json:"notes"`
	Pairs []peerPair `json:"pairs"`
}

type peerPair struct {
	Name    string `json:"name"`
	Request struct {
		Method    string            `json:"method"`
		Path      string            `json:"path"`
		Query     map[string]string `json:"query"`
		Headers   map[string]string `json:"headers"`
		JSON      json.RawMessage   `json:"json"`
		Multipart *struct {
			Name               string `json:"name"`
			Filename           string `json:"filename"`
			ContentType        string `json:"contentType"`
			ContentDisposition string `json:"contentDisposition"`
			Content            string `json:"content"`
		} `json:"multipart"`
	} `json:"request"`
	Response struct {
		StatusClass int `json:"statusClass"`
		Reads       []struct {
			Path string `json:"path"`
			Type string `json:"type"`
		} `json:"reads"`
		Equals      map[string]any    `json:"equals"`
		Contains    map[string]string `json:"contains"`
		NotContains map[string]string `json:"notContains"`
		Has         map[string]any    `json:"has"`
		Body        *string           `json:"body"`
		Check       string            `json:"check"`
	} `json:"response"`
}

var pathSegment = regexp.MustCompile(`^([^\[\]]+)(\[(\d*)\])?$`)

// lookup returns the values at path in v: "a.b" is a key path, "v[]" every
// element of array v, "v[0]" its first.
func lookup(v any, path string) []any {
	cur := []any{v}
	for _, seg := range strings.Split(path, ".") {
		m := pathSegment.FindStringSubmatch(seg)
		if m == nil {
			return nil
		}
		var next []any
		for _, c := range cur {
			obj, ok := c.(map[string]any)
			if !ok {
				continue
			}
			e, ok := obj[m[1]]
			if !ok {
				continue
			}
			if m[2] == "" {
				next = append(next, e)
				continue
			}
			arr, ok := e.([]any)
			if !ok {
				continue
			}
			if m[3] == "" {
				next = append(next, arr...)
			} else if i, _ := strconv.Atoi(m[3]); i < len(arr) {
				next = append(next, arr[i])
			}
		}
		cur = next
	}
	return cur
}

func jsonType(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "string"
	case float64:
		return "number"
	case bool:
		return "bool"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return fmt.Sprintf("%T", v)
}

// autogenPackages parses an execution's answer the way AutoGen's
// get_available_packages does: output = stderr + stdout + str(result), "[]"
// stripped from both ends, split on ",\n", each name stripped of " '".
func autogenPackages(props map[string]any) []string {
	out := fmt.Sprint(props["stderr"]) + fmt.Sprint(props["stdout"])
	if s, ok := props["result"].(string); ok {
		out += s
	} else {
		b, _ := json.Marshal(props["result"])
		out += string(b)
	}
	var names []string
	for _, p := range strings.Split(strings.Trim(out, "[]"), ",\n") {
		names = append(names, strings.Trim(p, " '"))
	}
	return names
}

var packageName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)

// TestPeerClientCaptures replays what the LlamaIndex, LangChain, Semantic
// Kernel (Python and .NET) and AutoGen clients send (testdata/peers, written
// from their public sources) against the emulator running real Python, and
// checks what each client depends on: a 2xx status, the keys it reads and
// their JSON types, the values its logic tests (AutoGen's "Success" /
// "Failure" in status and its parse of the package list), file bytes.
func TestPeerClientCaptures(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob(filepath.Join("..", "testdata", "peers", "*.json"))
	require.NoError(t, err)
	require.Len(t, files, 5, "LlamaIndex, LangChain, Semantic Kernel Python and .NET, AutoGen")
	e := newPythonEnv(t)
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		var pc peerCapture
		require.NoError(t, json.Unmarshal(b, &pc), f)
		require.NotEmpty(t, pc.Source, f)
		for _, s := range pc.Source {
			require.Regexp(t, `^[0-9a-f]{40}$`, s.Commit, "%s: every source names its commit", f)
			require.Equal(t, "https://github.com/"+s.Repo+"/blob/"+s.Commit+"/"+s.Path, s.URL, f)
		}
		ident := "peer-" + strings.TrimSuffix(filepath.Base(f), ".json") + "-" + uuid.New()[:8]
		t.Run(filepath.Base(f), func(t *testing.T) {
			t.Parallel() // each client on its own session
			for _, p := range pc.Pairs {
				replayPeerPair(t, e, pc.Client, ident, p)
			}
		})
	}
}

func replayPeerPair(t *testing.T, e *env, client, ident string, p peerPair) {
	t.Helper()
	subst := strings.NewReplacer("{identifier}", ident, "{token}", "peer-test-token")
	q := url.Values{}
	for k, v := range p.Request.Query {
		q.Set(k, subst.Replace(v))
	}
	u := e.srv.URL + e.h.PoolPath() + "/" + p.Request.Path + "?" + q.Encode()
	var body io.Reader
	hdr := map[string]string{}
	for k, v := range p.Request.Headers {
		hdr[k] = subst.Replace(v)
	}
	switch {
	case p.Request.JSON != nil:
		body = bytes.NewReader(p.Request.JSON)
	case p.Request.Multipart != nil:
		mp := p.Request.Multipart
		var buf bytes.Buffer
		w := multipart.NewWriter(&buf)
		h := textproto.MIMEHeader{}
		cd := mp.ContentDisposition
		if cd == "" {
			cd = fmt.Sprintf(`form-data; name=%q; filename=%q`, mp.Name, mp.Filename)
		}
		h.Set("Content-Disposition", cd)
		if mp.ContentType != "" {
			h.Set("Content-Type", mp.ContentType)
		}
		part, err := w.CreatePart(h)
		require.NoError(t, err)
		_, err = part.Write([]byte(mp.Content))
		require.NoError(t, err)
		require.NoError(t, w.Close())
		body = &buf
		hdr["Content-Type"] = w.FormDataContentType()
	}
	r := e.do(p.Request.Method, u, body, hdr)
	what := fmt.Sprintf("%s %q: %s %s -> %d %s", client, p.Name, p.Request.Method, p.Request.Path, r.status, r.body)
	want := p.Response
	require.Equal(t, want.StatusClass, r.status/100, what)
	if want.Body != nil {
		require.Equal(t, *want.Body, string(r.body), what)
	}
	if len(want.Reads)+len(want.Equals)+len(want.Contains)+len(want.NotContains)+len(want.Has) == 0 && want.Check == "" {
		return
	}
	var doc any
	require.NoError(t, json.Unmarshal(r.body, &doc), what)
	for _, rd := range want.Reads {
		got := lookup(doc, rd.Path)
		require.NotEmpty(t, got, "%s: the client reads %s", what, rd.Path)
		for _, v := range got {
			if rd.Type != "any" {
				require.Equal(t, rd.Type, jsonType(v), "%s: %s", what, rd.Path)
			}
		}
	}
	for path, wantV := range want.Equals {
		got := lookup(doc, path)
		require.NotEmpty(t, got, "%s: %s", what, path)
		for _, v := range got {
			require.True(t, reflect.DeepEqual(wantV, v), "%s: %s = %#v, want %#v", what, path, v, wantV)
		}
	}
	for path, sub := range want.Contains {
		got := lookup(doc, path)
		require.Len(t, got, 1, "%s: %s", what, path)
		require.Contains(t, got[0], sub, "%s: %s", what, path)
	}
	for path, sub := range want.NotContains {
		for _, v := range lookup(doc, path) {
			require.NotContains(t, v, sub, "%s: %s", what, path)
		}
	}
	for path, wantV := range want.Has {
		found := false
		for _, v := range lookup(doc, path) {
			found = found || reflect.DeepEqual(wantV, v)
		}
		require.True(t, found, "%s: no %s is %#v", what, path, wantV)
	}
	switch want.Check {
	case "":
	case "autogen-packages":
		props, _ := doc.(map[string]any)["properties"].(map[string]any)
		names := autogenPackages(props)
		require.Greater(t, len(names), 3, "%s: AutoGen would see %q", what, names)
		for _, n := range names {
			require.Regexp(t, packageName, n, "%s: AutoGen would see the package %q", what, n)
		}
		require.Contains(t, names, "ipython", what)
	default:
		t.Fatalf("unknown check %q", want.Check)
	}
}
