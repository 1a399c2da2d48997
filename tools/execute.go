package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"

	"github.com/azsessions/azsessions"
)

// executionAnswer is the answer of code_interpreter; the field order is the
// key order of the JSON ("status" first).
type executionAnswer struct {
	Status                      string `json:"status"`
	Stdout                      string `json:"stdout"`
	Stderr                      string `json:"stderr"`
	Result                      any    `json:"result"`
	ExecutionTimeInMilliseconds int64  `json:"executionTimeInMilliseconds"`
	Note                        string `json:"note,omitempty"`
}

// imageAnswer stands in for an image result.
type imageAnswer struct {
	Type        string `json:"type"`
	Format      string `json:"format"`
	SizeInBytes int    `json:"size_in_bytes"`
	SavedTo     string `json:"saved_to,omitempty"`
	Note        string `json:"note"`
}

func (ts *toolset) codeInterpreter(ctx context.Context, arguments string) (string, error) {
	args, aerr := decodeArgs[codeInterpreterArgs](arguments)
	if aerr != nil {
		return aerr.msg, nil
	}
	code := args.PythonCode
	if !ts.opts.DisableSanitize {
		code = SanitizeInput(code)
	}
	if strings.TrimSpace(code) == "" {
		return invalidArgs("python_code is empty"), nil
	}
	resp, err := ts.session.Execute(ctx, code, &azsessions.ExecuteOptions{
		Timeout:                ts.opts.Timeout,
		OutputStreamsMaxLength: ts.opts.OutputStreamsMaxLength,
	})
	if err != nil {
		return "", serviceError(err)
	}
	exec := resp.Execution
	ans := executionAnswer{
		Status:                      string(exec.Status),
		Stdout:                      exec.Stdout,
		Stderr:                      exec.Stderr,
		ExecutionTimeInMilliseconds: exec.ExecutionTime.Milliseconds(),
	}
	var notes []string
	if img, ok := exec.Image(); ok {
		attach := imageFunc(ctx)
		shown := "the image is not shown to you"
		if attach != nil {
			shown = "the image is attached to this answer"
		}
		ia := imageAnswer{Type: "image", Format: img.Format, SizeInBytes: len(img.Data), Note: shown}
		if ts.opts.LocalDir != "" {
			name, err := ts.saveImage(img)
			if err != nil {
				notes = append(notes, "the image could not be saved locally")
			} else {
				ia.SavedTo = name
				ia.Note = shown + "; it was saved for the user as " + name
			}
		}
		if ts.opts.OnImage != nil {
			ts.opts.OnImage(img)
		}
		if attach != nil {
			attach(img)
		}
		ans.Result = ia
	} else {
		ans.Result = resultValue(exec.Result)
	}
	if exec.TimedOut() {
		notes = append(notes, fmt.Sprintf("the execution was stopped at its timeout after %.1f s: make the code faster, or split the work into several calls", exec.ExecutionTime.Seconds()))
	}
	if ee := (*azsessions.ExecutionError)(nil); errors.As(exec.Err(), &ee) && ee.StderrCut {
		notes = append(notes, "stderr (the traceback) was cut at the output cap, so its end may be missing; the last complete line is: "+ee.Message)
	}
	if exec.Truncated() {
		n := int(ts.opts.OutputStreamsMaxLength)
		if n <= 0 {
			n = azsessions.DefaultOutputStreamsMaxLength
		}
		hint := "write large output to a file under /mnt/data (the user can download it) and print only a summary or read the file in parts"
		if ts.opts.LocalDir != "" {
			hint = "write large output to a file under /mnt/data and download it with download_file, or print only a summary"
		}
		notes = append(notes, fmt.Sprintf("the output was truncated at %d characters: %s", n, hint))
	}
	ans.Note = strings.Join(notes, "; ")
	return marshal(ans), nil
}

// resultValue returns the result for the answer: the raw JSON when it is
// valid JSON, "" when there is none, else the text as a string.
func resultValue(raw json.RawMessage) any {
	if len(raw) == 0 {
		return ""
	}
	if json.Valid(raw) {
		return raw
	}
	return string(raw)
}

// imageMu serialises the choice of image names within a process.
var imageMu sync.Mutex

// saveImage writes img into LocalDir under the first free name image-N.<format>
// and returns that name.
func (ts *toolset) saveImage(img azsessions.Image) (string, error) {
	root, err := os.OpenRoot(ts.opts.LocalDir)
	if err != nil {
		return "", err
	}
	defer root.Close()
	ext := safeExt(img.Format)
	imageMu.Lock()
	defer imageMu.Unlock()
	for i := 1; i <= 10000; i++ {
		name := "image-" + strconv.Itoa(i) + "." + ext
		f, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if os.IsExist(err) {
			continue
		}
		if err != nil {
			return "", err
		}
		_, err = f.Write(img.Data)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			_ = root.Remove(name)
			return "", err
		}
		return name, nil
	}
	return "", os.ErrExist
}

// safeExt returns format when it is a short alphanumeric word, else "bin".
func safeExt(format string) string {
	format = strings.ToLower(format)
	if format == "" || len(format) > 8 {
		return "bin"
	}
	for _, r := range format {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9') {
			return "bin"
		}
	}
	return format
}
