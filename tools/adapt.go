package tools

import (
	"context"
	"encoding/json"
	"fmt"
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

// StrictParameters returns t.Parameters as a JSON Schema for "strict"
// function calling (OpenAI's structured outputs): every property is listed in
// "required", and a property that t.Parameters does not require becomes
// nullable ("type": [T, "null"]); a Call takes null as absent. The schema has
// "additionalProperties": false. It is derived from t.Parameters, the one
// source of the tools' schemas, as a new map the caller may keep.
//
// It fails when t.Parameters is not a JSON object schema.
func (t Tool) StrictParameters() (map[string]any, error) {
	var schema map[string]any
	if err := json.Unmarshal(t.Parameters, &schema); err != nil {
		return nil, fmt.Errorf("tools: %s: parameters: %w", t.Name, err)
	}
	if schema["type"] != "object" {
		return nil, fmt.Errorf("tools: %s: parameters: not an object schema", t.Name)
	}
	props, _ := schema["properties"].(map[string]any)
	if props == nil {
		props = map[string]any{}
	}
	required := map[string]bool{}
	if req, ok := schema["required"].([]any); ok {
		for _, r := range req {
			if s, ok := r.(string); ok {
				required[s] = true
			}
		}
	}
	names := make([]string, 0, len(props))
	for name, p := range props {
		names = append(names, name)
		if required[name] {
			continue
		}
		prop, ok := p.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("tools: %s: parameters: property %q is not a schema", t.Name, name)
		}
		if typ, ok := prop["type"].(string); ok {
			prop["type"] = []any{typ, "null"}
		}
	}
	slices.Sort(names)
	req := make([]any, len(names))
	for i, n := range names {
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
