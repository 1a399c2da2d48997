package tools_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/azsessions/azsessions"
	"github.com/azsessions/azsessions/tools"
)

func TestWithImageFunc(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		code string
		want []azsessions.Image
	}{
		{"image result", "image", []azsessions.Image{{Format: "png", Data: pngBytes}}},
		{"no image", "1+1", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var fromOptions, fromContext []azsessions.Image
			e := newEnv(t, &tools.Options{OnImage: func(img azsessions.Image) { fromOptions = append(fromOptions, img) }})
			ctx := tools.WithImageFunc(t.Context(), func(img azsessions.Image) { fromContext = append(fromContext, img) })
			args, err := json.Marshal(map[string]string{"python_code": tt.code})
			require.NoError(t, err)
			out, err := e.tools[tools.NameCodeInterpreter].Call(ctx, string(args))
			require.NoError(t, err)
			if tt.want != nil {
				require.Contains(t, out, "the image is attached to this answer")
				require.NotContains(t, out, "not shown")
			}
			require.Equal(t, tt.want, fromContext)
			require.Equal(t, tt.want, fromOptions, "Options.OnImage still gets the image")
		})
	}
	require.Equal(t, context.Background(), tools.WithImageFunc(context.Background(), nil))
}

func TestStrictParameters(t *testing.T) {
	t.Parallel()
	e := newEnv(t, &tools.Options{LocalDir: "-"})
	tests := []struct {
		tool     string
		want     string
		nullable []string
	}{
		{tools.NameCodeInterpreter, `{"type":"object","properties":{"python_code":{"type":"string","description":"The Python code to run. Plain code, not a Markdown block."}},"required":["python_code"],"additionalProperties":false}`, nil},
		{tools.NameListFiles, `{"type":"object","properties":{},"required":[],"additionalProperties":false}`, nil},
		{tools.NameUploadFile, "", []string{"remote_file_name"}},
		{tools.NameDownloadFile, "", []string{"local_file_path"}},
	}
	for _, tt := range tests {
		t.Run(tt.tool, func(t *testing.T) {
			t.Parallel()
			tool := e.tools[tt.tool]
			got, err := tool.StrictParameters()
			require.NoError(t, err)
			if tt.want != "" {
				b, err := json.Marshal(got)
				require.NoError(t, err)
				require.JSONEq(t, tt.want, string(b))
			}
			var orig map[string]any
			require.NoError(t, json.Unmarshal(tool.Parameters, &orig))
			props := got["properties"].(map[string]any)
			require.Len(t, props, len(orig["properties"].(map[string]any)))
			require.Len(t, got["required"], len(props), "strict: every property is required")
			require.Equal(t, false, got["additionalProperties"])
			for _, n := range tt.nullable {
				require.Equal(t, []any{"string", "null"}, props[n].(map[string]any)["type"], n)
			}
		})
	}
	_, err := tools.Tool{Name: "x", Parameters: json.RawMessage(`{"type":"string"}`)}.StrictParameters()
	require.ErrorContains(t, err, "not an object schema")
	_, err = tools.Tool{Name: "x", Parameters: json.RawMessage(`nope`)}.StrictParameters()
	require.Error(t, err)
}

func TestImageMediaType(t *testing.T) {
	t.Parallel()
	tests := []struct{ format, want string }{
		{"png", "image/png"},
		{"PNG", "image/png"},
		{"jpeg", "image/jpeg"},
		{"jpg", "image/jpeg"},
		{"svg", "image/svg+xml"},
		{"gif", "image/gif"},
		{"", "application/octet-stream"},
		{"png; x=y", "application/octet-stream"},
		{"../../etc", "application/octet-stream"},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, tools.ImageMediaType(tt.format), tt.format)
	}
}

// TestObjectSchema: Parameters taken apart once for StrictParameters and the
// adapters (properties, their sorted names, required in order, other
// keywords), and refused when it is not an object schema.
func TestObjectSchema(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		params    string
		wantNames []string
		wantReq   []string
		wantExtra []string
		wantProps bool
		wantErr   string
	}{
		{"two properties", `{"type":"object","properties":{"b":{"type":"string"},"a":{"type":"string"}},"required":["b"],"additionalProperties":false}`, []string{"a", "b"}, []string{"b"}, []string{"additionalProperties"}, true, ""},
		{"no properties", `{"type":"object"}`, nil, nil, nil, false, ""},
		{"not an object", `{"type":"string"}`, nil, nil, nil, false, "x: parameters: not an object schema"},
		{"not JSON", `nope`, nil, nil, nil, false, "x: parameters:"},
		{"properties not an object", `{"type":"object","properties":[]}`, nil, nil, nil, false, "properties"},
		{"required not a list", `{"type":"object","required":"a"}`, nil, nil, nil, false, "required"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			sc, err := tools.Tool{Name: "x", Parameters: json.RawMessage(tt.params)}.ObjectSchema()
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.wantNames, sc.PropertyNames)
			require.Equal(t, tt.wantReq, sc.Required)
			require.Equal(t, tt.wantProps, sc.Properties != nil)
			var extra []string
			for k := range sc.Extra {
				extra = append(extra, k)
			}
			require.Equal(t, tt.wantExtra, extra)
		})
	}
}
