package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/azsessions/azsessions"
)

// imageFuncKey is the context key of WithImageFunc.
type imageFuncKey struct{}

// WithImageFunc returns a context that makes a Call of code_interpreter (run
// with that context) hand every image result to f, in addition to
// Options.OnImage. Adapters use it to attach the image of one tool call to
// that call's answer (an MCP ImageContent, an Anthropic image block); the
// answer's note then says "the image is attached to this answer" instead of
// "the image is not shown to you". f is
// called on the goroutine of Call, before Call returns; a nil f leaves ctx
// unchanged.
func WithImageFunc(ctx context.Context, f func(azsessions.Image)) context.Context {
	if f == nil {
		return ctx
	}
	return context.WithValue(ctx, imageFuncKey{}, f)
}

// imageFunc returns the function set by WithImageFunc, or nil.
func imageFunc(ctx context.Context) func(azsessions.Image) {
	f, _ := ctx.Value(imageFuncKey{}).(func(azsessions.Image))
	return f
}

// ObjectSchema is a tool's Parameters (a JSON Schema of type "object") taken
// apart as function-calling APIs want it: the one reading of Parameters that
// StrictParameters and the adapters translate.
type ObjectSchema struct {
	// Properties is the schema's "properties" object as JSON; nil when the
	// schema has none.
	Properties json.RawMessage
	// PropertyNames are the names of the properties, sorted.
	PropertyNames []string
	// Required lists the required properties in the schema's order.
	Required []string
	// Extra holds the schema's other keywords, such as
	// "additionalProperties", as JSON.
	Extra map[string]json.RawMessage
}

// ObjectSchema reads t.Parameters. It fails when that is not a JSON object
// schema ("type": "object", "properties" an object, "required" a list of
// names).
func (t Tool) ObjectSchema() (ObjectSchema, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(t.Parameters, &m); err != nil {
		return ObjectSchema{}, fmt.Errorf("tools: %s: parameters: %w", t.Name, err)
	}
	if string(bytes.TrimSpace(m["type"])) != `"object"` {
		return ObjectSchema{}, fmt.Errorf("tools: %s: parameters: not an object schema", t.Name)
	}
	sc := ObjectSchema{Extra: map[string]json.RawMessage{}}
	if p, ok := m["properties"]; ok {
		var props map[string]json.RawMessage
		if err := json.Unmarshal(p, &props); err != nil {
			return ObjectSchema{}, fmt.Errorf("tools: %s: parameters: properties: %w", t.Name, err)
		}
		sc.Properties = p
		sc.PropertyNames = slices.Sorted(maps.Keys(props))
	}
	if r, ok := m["required"]; ok {
		if err := json.Unmarshal(r, &sc.Required); err != nil {
			return ObjectSchema{}, fmt.Errorf("tools: %s: parameters: required: %w", t.Name, err)
		}
	}
	for k, v := range m {
		if k != "type" && k != "properties" && k != "required" {
			sc.Extra[k] = v
		}
	}
	return sc, nil
}

// StrictParameters returns t.Parameters as a JSON Schema for "strict"
// function calling (OpenAI's structured outputs): every property is listed in
// "required", and a property that t.Parameters does not require becomes
// nullable ("type": [T, "null"]); a Call takes null as absent. The schema has
// "additionalProperties": false. It is derived from t.ObjectSchema, as a new
// map the caller may keep.
//
// It fails when t.Parameters is not a JSON object schema.
func (t Tool) StrictParameters() (map[string]any, error) {
	sc, err := t.ObjectSchema()
	if err != nil {
		return nil, err
	}
	schema := map[string]any{"type": "object"}
	for k, v := range sc.Extra {
		var x any
		if err := json.Unmarshal(v, &x); err != nil {
			return nil, fmt.Errorf("tools: %s: parameters: %s: %w", t.Name, k, err)
		}
		schema[k] = x
	}
	props := map[string]any{}
	if sc.Properties != nil {
		if err := json.Unmarshal(sc.Properties, &props); err != nil {
			return nil, fmt.Errorf("tools: %s: parameters: properties: %w", t.Name, err)
		}
	}
	for _, name := range sc.PropertyNames {
		if slices.Contains(sc.Required, name) {
			continue
		}
		prop, ok := props[name].(map[string]any)
		if !ok {
			return nil, fmt.Errorf("tools: %s: parameters: property %q is not a schema", t.Name, name)
		}
		if typ, ok := prop["type"].(string); ok {
			prop["type"] = []any{typ, "null"}
		}
	}
	req := make([]any, len(sc.PropertyNames))
	for i, n := range sc.PropertyNames {
		req[i] = n
	}
	schema["properties"] = props
	schema["required"] = req
	schema["additionalProperties"] = false
	return schema, nil
}

// ImageMediaType returns the media type of an image format of the service
// (azsessions.Image.Format), such as "image/png" for "png" and "image/jpeg"
// for "jpeg" or "jpg"; "application/octet-stream" for an empty format or one
// that is not a short alphanumeric word.
func ImageMediaType(format string) string {
	f := strings.ToLower(format)
	switch f {
	case "jpg", "jpeg":
		return "image/jpeg"
	case "svg":
		return "image/svg+xml"
	}
	if safeExt(f) != f {
		return "application/octet-stream"
	}
	return "image/" + f
}
