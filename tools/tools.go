package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/azsessions/azsessions"
)

// Tool names.
const (
	NameCodeInterpreter = "code_interpreter"
	NameListFiles       = "list_files"
	NameUploadFile      = "upload_file"
	NameDownloadFile    = "download_file"
)

// Tool is one tool for a function-calling model.
type Tool struct {
	// Name is the function name the model calls, such as "code_interpreter".
	Name string
	// Description tells the model what the tool does and what it answers.
	Description string
	// Parameters is the JSON Schema (type "object") of the arguments object.
	Parameters json.RawMessage
	// Call runs the tool. arguments is the JSON object the model sent ("" is
	// taken as {}). The string is the answer for the model (JSON text). Mistakes
	// of the model, such as invalid arguments, are answered as
	// {"error":"..."} with a nil error; a non-nil error is an *Error whose text
	// is short and safe to show to the model (see the package documentation).
	Call func(ctx context.Context, arguments string) (string, error)
}

// Options contains the optional parameters of New.
type Options struct {
	// LocalDir enables upload_file and download_file, which read and write
	// files inside this local directory only. It should exist; it is resolved
	// (symbolic links included) on every call.
	LocalDir string
	// DisableSanitize passes python_code to the service exactly as the model
	// wrote it, without SanitizeInput.
	DisableSanitize bool
	// OnImage, when set, receives every image that code_interpreter returns
	// (decoded bytes and format), after it was saved to LocalDir if that is
	// set. It is called on the goroutine of Call, before Call returns. To get
	// the image of one call, see WithImageFunc.
	OnImage func(azsessions.Image)
	// Timeout bounds each execution on the service side (see
	// azsessions.ExecuteOptions.Timeout); zero means the service's maximum,
	// 220 s.
	Timeout time.Duration
	// OutputStreamsMaxLength caps stdout and stderr, each, in characters
	// (api-version 2025-10-02-preview only); zero means the service default, 4096.
	OutputStreamsMaxLength int32
}

// New returns the tools for session: code_interpreter and list_files, then
// upload_file and download_file when options.LocalDir is set. options may be
// nil. The tools are safe for concurrent use. New panics if session is nil.
func New(session *azsessions.Session, options *Options) []Tool {
	if session == nil {
		panic("tools: session is nil")
	}
	ts := &toolset{session: session}
	if options != nil {
		ts.opts = *options
	}
	var out []Tool
	for _, d := range toolTable {
		if d.localDir && ts.opts.LocalDir == "" {
			continue
		}
		call := d.call
		out = append(out, Tool{Name: d.name, Description: d.description, Parameters: schemas[d.name], Call: func(ctx context.Context, arguments string) (string, error) {
			return call(ts, ctx, arguments)
		}})
	}
	return out
}

type toolset struct {
	session *azsessions.Session
	opts    Options
}

const descCodeInterpreter = `Runs Python code in a sandboxed, stateful Python session (like a Jupyter notebook cell): variables, imports and files persist between calls. ` +
	`Files uploaded for you and files you create live in /mnt/data. ` +
	`Print what you need to see (stdout) or end the code with an expression whose value you want (result). ` +
	`Answers JSON: status (Succeeded or Failed), stdout, stderr (the traceback when the code failed: fix the code and try again), result, executionTimeInMilliseconds, and sometimes a note. ` +
	`An image result (for example a matplotlib figure) is never inlined as text: you get its format and size, and the image itself only where the answer says it is attached. ` +
	`Output is capped at a few thousand characters: write large output to a file under /mnt/data instead.`

const descListFiles = `Lists the files in the session's /mnt/data directory. Answers a JSON array of {filename, size_in_bytes, file_full_path}.`

const descUploadFile = `Uploads a file from the user's local directory into the session's /mnt/data directory so that Python code can read it. ` +
	`local_file_path is relative to the local directory. Answers JSON {filename, size_in_bytes, file_full_path}.`

const descDownloadFile = `Downloads a file from the session's /mnt/data directory into the user's local directory. ` +
	`It never overwrites a local file: when the name is taken it saves under a new name and says so. Answers JSON with saved_to, the local name relative to the local directory.`

// marshal encodes v as compact JSON without HTML escaping (models read "<"
// better than "\u003c").
func marshal(v any) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		// only our own types are encoded here; this cannot happen
		return `{"error":"internal error: could not encode the answer"}`
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// modelError is the answer for a mistake of the model.
func modelError(format string, args ...any) string {
	return marshal(struct {
		Error string `json:"error"`
	}{fmt.Sprintf(format, args...)})
}
