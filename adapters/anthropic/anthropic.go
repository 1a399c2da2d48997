// Package anthropictools adapts the azsessions agent tools (package
// github.com/azsessions/azsessions/tools) to the Anthropic SDK for Go
// (github.com/anthropics/anthropic-sdk-go/v2): the tools as ToolParams and a
// dispatcher that runs the tool_use blocks of a message and returns the
// tool_result blocks, with image results as image blocks. It only
// translates: what the tools do and answer is documented in package tools.
//
//	ts, err := anthropictools.New(tools.New(session, nil))
//	params.Tools = ts.Tools()
//	msg, err := client.Messages.New(ctx, params)
//	params.Messages = append(params.Messages, msg.ToParam())
//	results, err := ts.ToolResults(ctx, msg.Content)
//	params.Messages = append(params.Messages, anthropic.NewUserMessage(results...))
package anthropictools

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/azsessions/azsessions"
	"github.com/azsessions/azsessions/tools"
)

// Toolset holds the tools and dispatches the model's tool_use blocks to them
// by name. It is safe for concurrent use when its tools are (those of
// tools.New are).
type Toolset struct {
	list   []tools.Tool
	byName map[string]tools.Tool
	schema map[string]schema
}

// schema is a tool's input schema split as ToolInputSchemaParam wants it.
type schema struct {
	properties json.RawMessage
	required   []string
	extra      map[string]json.RawMessage // such as additionalProperties
}

// New returns a Toolset for ts (usually tools.New(session, options)). It
// fails when two tools share a name or a tool's Parameters is not a JSON
// object schema.
func New(ts []tools.Tool) (*Toolset, error) {
	s := &Toolset{byName: map[string]tools.Tool{}, schema: map[string]schema{}}
	for _, t := range ts {
		if _, dup := s.byName[t.Name]; dup {
			return nil, fmt.Errorf("anthropictools: two tools named %q", t.Name)
		}
		sc, err := t.ObjectSchema()
		if err != nil {
			return nil, fmt.Errorf("anthropictools: %w", err)
		}
		s.list = append(s.list, t)
		s.byName[t.Name] = t
		s.schema[t.Name] = schema{properties: sc.Properties, required: sc.Required, extra: sc.Extra}
	}
	return s, nil
}

// Tools returns the tools for anthropic.MessageNewParams.Tools, in the order
// of the tools given to New; each input schema is the tool's Parameters.
func (s *Toolset) Tools() []anthropic.ToolUnionParam {
	out := make([]anthropic.ToolUnionParam, 0, len(s.list))
	for _, t := range s.list {
		sc := s.schema[t.Name]
		in := anthropic.ToolInputSchemaParam{Required: sc.required}
		if len(sc.properties) > 0 {
			in.Properties = sc.properties
		}
		if len(sc.extra) > 0 {
			in.ExtraFields = map[string]any{}
			for k, v := range sc.extra {
				in.ExtraFields[k] = v
			}
		}
		out = append(out, anthropic.ToolUnionParam{OfTool: &anthropic.ToolParam{
			Name:        t.Name,
			Description: anthropic.String(t.Description),
			InputSchema: in,
		}})
	}
	return out
}

// ToolResults runs the tool_use blocks of an assistant message's content
// (anthropic.Message.Content), one after the other, and returns one
// tool_result block per tool_use, in order; send them as the next user
// message (anthropic.NewUserMessage(results...)). Other blocks are ignored.
//
// A tool_result holds the tool's answer as a text block and, when
// code_interpreter returned an image in a format the Messages API takes
// (PNG, JPEG, GIF, WebP), an image block (base64 data and media type) after
// it. A call of an unknown tool gets a tool_result with is_error set.
//
// When the service could not be used (transport failure, 401/403, 429, 5xx,
// context ended), the call's tool_result has is_error set and the short, safe
// text of the *tools.Error, and the returned error (errors.Join of each
// failed call's error, which wraps the *tools.Error) is non-nil. The blocks
// are complete even then: send them to keep the conversation valid and let
// the model explain, or stop on the error.
func (s *Toolset) ToolResults(ctx context.Context, content []anthropic.ContentBlockUnion) ([]anthropic.ContentBlockParamUnion, error) {
	var out []anthropic.ContentBlockParamUnion
	var errs []error
	for _, block := range content {
		if block.Type != "tool_use" {
			continue
		}
		use := block.AsToolUse()
		t, ok := s.byName[use.Name]
		if !ok {
			out = append(out, anthropic.NewToolResultBlock(use.ID, "unknown tool "+strconv.Quote(use.Name)+"; the tools are "+strings.Join(s.names(), ", "), true))
			continue
		}
		var images []azsessions.Image
		callCtx := tools.WithImageFunc(ctx, func(img azsessions.Image) { images = append(images, img) })
		text, err := t.Call(callCtx, string(use.Input))
		if err != nil {
			// err's text is short and holds no identifier nor token; its cause may.
			errs = append(errs, fmt.Errorf("anthropictools: tool %s: %w", use.Name, err))
			out = append(out, anthropic.NewToolResultBlock(use.ID, err.Error(), true))
			continue
		}
		result := anthropic.ToolResultBlockParam{
			ToolUseID: use.ID,
			Content:   []anthropic.ToolResultBlockParamContentUnion{{OfText: &anthropic.TextBlockParam{Text: text}}},
		}
		for _, img := range images {
			if b, ok := ImageBlock(img); ok {
				result.Content = append(result.Content, anthropic.ToolResultBlockParamContentUnion{OfImage: b})
			}
		}
		out = append(out, anthropic.ContentBlockParamUnion{OfToolResult: &result})
	}
	return out, errors.Join(errs...)
}

func (s *Toolset) names() []string {
	out := make([]string, len(s.list))
	for i, t := range s.list {
		out[i] = t.Name
	}
	return out
}

// ImageBlock returns img as an image block with a base64 source; ok is false
// when its format is not one the Messages API takes (PNG, JPEG, GIF, WebP).
func ImageBlock(img azsessions.Image) (block *anthropic.ImageBlockParam, ok bool) {
	mt := anthropic.Base64ImageSourceMediaType(tools.ImageMediaType(img.Format))
	switch mt {
	case anthropic.Base64ImageSourceMediaTypeImagePNG, anthropic.Base64ImageSourceMediaTypeImageJPEG,
		anthropic.Base64ImageSourceMediaTypeImageGIF, anthropic.Base64ImageSourceMediaTypeImageWebP:
	default:
		return nil, false
	}
	return &anthropic.ImageBlockParam{Source: anthropic.ImageBlockParamSourceUnion{OfBase64: &anthropic.Base64ImageSourceParam{
		Data:      base64.StdEncoding.EncodeToString(img.Data),
		MediaType: mt,
	}}}, true
}
