// Package specexample reads the examples of the public REST specifications
// (Azure/azure-rest-api-specs, specification/app/data-plane/DynamicSessions,
// copied to testdata/examples/spec/<api-version>/<name>.json) as data. The
// client's golden test and the emulator's conformance test both build their
// expectations from these files, never from internal/wire's structs.
package specexample

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
)

// Example is one example file: the operation, its parameters and its one
// response, as written in the spec.
type Example struct {
	// File is "<api-version>/<name>.json".
	File string `json:"-"`
	// Version is the api-version, the name of the example's directory.
	Version     string                     `json:"-"`
	OperationID string                     `json:"operationId"`
	Parameters  map[string]json.RawMessage `json:"parameters"`
	// Responses maps the status code ("200") to the response.
	Responses map[string]Response `json:"responses"`
}

// Response is an example's response: its headers and JSON body.
type Response struct {
	Headers map[string]string `json:"headers"`
	Body    json.RawMessage   `json:"body"`
}

// Param returns the parameter name: a JSON string's value, other JSON as
// written, "" when absent.
func (x Example) Param(name string) string {
	raw, ok := x.Parameters[name]
	if !ok {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	return string(raw)
}

// Has reports whether the example sets the parameter name.
func (x Example) Has(name string) bool { _, ok := x.Parameters[name]; return ok }

// Load reads every dir/<api-version>/*.json. It fails on a file that is not
// JSON, whose api-version parameter is not its directory's name, or that
// has other than one response.
func Load(dir string) ([]Example, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*", "*.json"))
	if err != nil {
		return nil, err
	}
	out := make([]Example, 0, len(files))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		var x Example
		if err := json.Unmarshal(b, &x); err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		x.Version = filepath.Base(filepath.Dir(f))
		x.File = x.Version + "/" + filepath.Base(f)
		if v := x.Param("api-version"); v != x.Version {
			return nil, fmt.Errorf("%s: api-version %q is not its directory's", f, v)
		}
		if len(x.Responses) != 1 {
			return nil, fmt.Errorf("%s: %d responses, want 1", f, len(x.Responses))
		}
		out = append(out, x)
	}
	return out, nil
}
