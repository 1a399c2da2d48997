package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
)

// toolDef is one row of the table of tools, the one place where a tool is
// defined: its name, its description, its arguments as a Go struct and the
// method that runs it. The JSON Schema of Tool.Parameters is derived from the
// struct (schemaOf) once, and a Call decodes the model's arguments into the
// same struct (decodeArgs); the MCP server and the adapters only translate
// Tool. Each field of an args struct is a string argument: its json tag is
// the argument's name, `required:"true"` makes it required and its
// description tag is the schema's description.
type toolDef struct {
	name, description string
	args              reflect.Type // a struct of string fields
	// localDir: offered only with Options.LocalDir.
	localDir bool
	call     func(ts *toolset, ctx context.Context, arguments string) (string, error)
}

// codeInterpreterArgs are the arguments of code_interpreter.
type codeInterpreterArgs struct {
	PythonCode string `json:"python_code" required:"true" description:"The Python code to run. Plain code, not a Markdown block."`
}

// listFilesArgs are the arguments of list_files: none.
type listFilesArgs struct{}

// uploadFileArgs are the arguments of upload_file.
type uploadFileArgs struct {
	LocalFilePath  string `json:"local_file_path" required:"true" description:"Path of the local file, relative to the local directory."`
	RemoteFileName string `json:"remote_file_name" description:"Name to give the file under /mnt/data; default: the local file's name."`
}

// downloadFileArgs are the arguments of download_file.
type downloadFileArgs struct {
	RemoteFilePath string `json:"remote_file_path" required:"true" description:"The file in the session, such as \"data.csv\" or \"/mnt/data/data.csv\"."`
	LocalFilePath  string `json:"local_file_path" description:"Where to save it, relative to the local directory; default: the file's name."`
}

// toolTable lists the tools in the order New returns them.
var toolTable = []toolDef{
	{name: NameCodeInterpreter, description: descCodeInterpreter, args: reflect.TypeFor[codeInterpreterArgs](), call: (*toolset).codeInterpreter},
	{name: NameListFiles, description: descListFiles, args: reflect.TypeFor[listFilesArgs](), call: (*toolset).listFiles},
	{name: NameUploadFile, description: descUploadFile, args: reflect.TypeFor[uploadFileArgs](), localDir: true, call: (*toolset).uploadFile},
	{name: NameDownloadFile, description: descDownloadFile, args: reflect.TypeFor[downloadFileArgs](), localDir: true, call: (*toolset).downloadFile},
}

// schemas holds each tool's JSON Schema, derived once from its args struct.
var schemas = func() map[string]json.RawMessage {
	m := map[string]json.RawMessage{}
	for _, d := range toolTable {
		m[d.name] = schemaOf(d.args)
	}
	return m
}()

// argField is one argument of an args struct.
type argField struct {
	index       int
	name        string
	required    bool
	description string
}

// argFields returns the arguments of the args struct t, in field order. It
// panics on a field that is not a string with a json name (a mistake in
// the table, caught by the package's tests).
func argFields(t reflect.Type) []argField {
	var out []argField
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if f.Type.Kind() != reflect.String || name == "" || name == "-" {
			panic(fmt.Sprintf("tools: %s.%s: an argument is a string field with a json name", t.Name(), f.Name))
		}
		out = append(out, argField{index: i, name: name, required: f.Tag.Get("required") == "true", description: f.Tag.Get("description")})
	}
	return out
}

// schemaOf returns the JSON Schema of the arguments object of the args
// struct t: {"type":"object","properties":{...},"required":[...],
// "additionalProperties":false}, properties in field order, each
// {"type":"string","description":...}; "required" is left out when no
// argument is required.
func schemaOf(t reflect.Type) json.RawMessage {
	var b bytes.Buffer
	b.WriteString(`{"type":"object","properties":{`)
	var required []string
	for i, f := range argFields(t) {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `%s:{"type":"string","description":%s}`, marshal(f.name), marshal(f.description))
		if f.required {
			required = append(required, f.name)
		}
	}
	b.WriteString(`}`)
	if len(required) > 0 {
		fmt.Fprintf(&b, `,"required":%s`, marshal(required))
	}
	b.WriteString(`,"additionalProperties":false}`)
	return json.RawMessage(b.Bytes())
}

// argError is returned by decodeArgs: its text is the model's answer.
type argError struct{ msg string }

func (e *argError) Error() string { return e.msg }

// decodeArgs decodes the model's arguments (a JSON object; "" is taken as
// {}) into the args struct T of a tool: every required argument must be a
// string, an optional one a string or absent; null counts as absent and
// unknown fields are ignored. Its errors are the model's answer.
func decodeArgs[T any](arguments string) (T, *argError) {
	var args T
	fields := argFields(reflect.TypeFor[T]())
	arguments = strings.TrimSpace(arguments)
	if arguments == "" {
		arguments = "{}"
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal([]byte(arguments), &raw); err != nil || raw == nil {
		return args, &argError{invalidArgs("the arguments must be a JSON object" + argsHint(fields))}
	}
	v := reflect.ValueOf(&args).Elem()
	// required arguments first: a missing one is named before a mistyped optional one
	for _, pass := range []bool{true, false} {
		for _, f := range fields {
			if f.required != pass {
				continue
			}
			r, ok := raw[f.name]
			if !ok || string(bytes.TrimSpace(r)) == "null" {
				if f.required {
					return args, &argError{invalidArgs(f.name + " is required (a string)")}
				}
				continue
			}
			var s string
			if err := json.Unmarshal(r, &s); err != nil {
				return args, &argError{invalidArgs(f.name + " must be a string")}
			}
			v.Field(f.index).SetString(s)
		}
	}
	return args, nil
}

func invalidArgs(msg string) string { return modelError("invalid arguments: %s", msg) }

// argsHint shows the expected arguments object, required arguments first.
func argsHint(fields []argField) string {
	if len(fields) == 0 {
		return " ({})"
	}
	var parts []string
	for _, pass := range []bool{true, false} {
		for _, f := range fields {
			if f.required != pass {
				continue
			}
			if f.required {
				parts = append(parts, fmt.Sprintf("%q: string", f.name))
			} else {
				parts = append(parts, fmt.Sprintf("%q: string (optional)", f.name))
			}
		}
	}
	return " ({" + strings.Join(parts, ", ") + "})"
}
