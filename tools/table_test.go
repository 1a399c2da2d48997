package tools

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestSchemasUnchanged: the schemas derived from the args structs are, byte
// for byte, the ones the tools had when they were written out by hand.
func TestSchemasUnchanged(t *testing.T) {
	want := map[string]string{
		NameCodeInterpreter: `{"type":"object","properties":{"python_code":{"type":"string","description":"The Python code to run. Plain code, not a Markdown block."}},"required":["python_code"],"additionalProperties":false}`,
		NameListFiles:       `{"type":"object","properties":{},"additionalProperties":false}`,
		NameUploadFile:      `{"type":"object","properties":{"local_file_path":{"type":"string","description":"Path of the local file, relative to the local directory."},"remote_file_name":{"type":"string","description":"Name to give the file under /mnt/data; default: the local file's name."}},"required":["local_file_path"],"additionalProperties":false}`,
		NameDownloadFile:    `{"type":"object","properties":{"remote_file_path":{"type":"string","description":"The file in the session, such as \"data.csv\" or \"/mnt/data/data.csv\"."},"local_file_path":{"type":"string","description":"Where to save it, relative to the local directory; default: the file's name."}},"required":["remote_file_path"],"additionalProperties":false}`,
	}
	require.Len(t, schemas, len(want))
	for name, w := range want {
		require.Equal(t, w, string(schemas[name]), name)
	}
}

// TestSchemaMatchesArgs: for every tool of the table, the schema's
// properties and required list are the json names of its args struct's
// fields and those tagged required (read here from the struct, not through
// argFields), every property described; and the parser agrees with the
// schema: {} names the first required argument as missing, a number in any
// argument is refused as not a string, and a full object fills every field.
// The schema and the parser cannot drift apart from the struct.
func TestSchemaMatchesArgs(t *testing.T) {
	decoders := map[string]func(string) (any, *argError){
		NameCodeInterpreter: func(s string) (any, *argError) { return decodeArgs[codeInterpreterArgs](s) },
		NameListFiles:       func(s string) (any, *argError) { return decodeArgs[listFilesArgs](s) },
		NameUploadFile:      func(s string) (any, *argError) { return decodeArgs[uploadFileArgs](s) },
		NameDownloadFile:    func(s string) (any, *argError) { return decodeArgs[downloadFileArgs](s) },
	}
	require.Len(t, toolTable, len(decoders))
	for _, d := range toolTable {
		t.Run(d.name, func(t *testing.T) {
			var wantProps, wantRequired []string
			for i := range d.args.NumField() {
				f := d.args.Field(i)
				name := strings.Split(f.Tag.Get("json"), ",")[0]
				wantProps = append(wantProps, name)
				if f.Tag.Get("required") == "true" {
					wantRequired = append(wantRequired, name)
				}
			}
			var schema struct {
				Type                 string                     `json:"type"`
				Properties           map[string]json.RawMessage `json:"properties"`
				Required             []string                   `json:"required"`
				AdditionalProperties *bool                      `json:"additionalProperties"`
			}
			require.NoError(t, json.Unmarshal(schemas[d.name], &schema))
			require.Equal(t, "object", schema.Type)
			gotProps := slices.Sorted(func(yield func(string) bool) {
				for k := range schema.Properties {
					if !yield(k) {
						return
					}
				}
			})
			require.Equal(t, slices.Sorted(slices.Values(wantProps)), gotProps, "properties")
			require.Equal(t, wantRequired, schema.Required, "required")
			require.NotNil(t, schema.AdditionalProperties)
			require.False(t, *schema.AdditionalProperties)
			for name, p := range schema.Properties {
				var prop struct{ Type, Description string }
				require.NoError(t, json.Unmarshal(p, &prop))
				require.Equal(t, "string", prop.Type, name)
				require.NotEmpty(t, prop.Description, name)
			}

			decode := decoders[d.name]
			_, aerr := decode(`{}`)
			if len(wantRequired) > 0 {
				require.NotNil(t, aerr)
				require.Contains(t, aerr.msg, wantRequired[0]+" is required")
			} else {
				require.Nil(t, aerr)
			}
			full := map[string]string{}
			for _, name := range wantProps {
				bad := map[string]any{}
				for _, r := range wantRequired {
					bad[r] = "x"
				}
				bad[name] = 42
				b, _ := json.Marshal(bad)
				_, aerr := decode(string(b))
				require.NotNil(t, aerr, name)
				require.Contains(t, aerr.msg, name+" must be a string")
				full[name] = "value of " + name
			}
			b, _ := json.Marshal(full)
			got, aerr := decode(string(b))
			require.Nil(t, aerr)
			v := reflect.ValueOf(got)
			for i := range v.NumField() {
				name := strings.Split(d.args.Field(i).Tag.Get("json"), ",")[0]
				require.Equal(t, "value of "+name, v.Field(i).String())
			}
		})
	}
}

// TestArgFieldsRefuseNonStrings: a table mistake (an argument that is not a
// string field with a json name) panics at once.
func TestArgFieldsRefuseNonStrings(t *testing.T) {
	require.Panics(t, func() {
		argFields(reflect.TypeFor[struct {
			N int `json:"n"`
		}]())
	})
	require.Panics(t, func() { argFields(reflect.TypeFor[struct{ S string }]()) })
}
