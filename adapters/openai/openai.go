// Package openaitools adapts the azsessions agent tools (package
// github.com/azsessions/azsessions/tools) to openai-go
// (github.com/openai/openai-go/v3), for both the Chat Completions API and the
// Responses API. It only translates: what the tools do and answer is
// documented in package tools.
//
//	ts, err := openaitools.New(tools.New(session, nil))
//	params.Tools = ts.ChatCompletionTools()
//	completion, err := client.Chat.Completions.New(ctx, params)
//	msg := completion.Choices[0].Message
//	params.Messages = append(params.Messages, msg.ToParam())
//	results, err := ts.ChatCompletionToolMessages(ctx, msg.ToolCalls)
//	params.Messages = append(params.Messages, results...)
//
// The function definitions are strict (structured outputs): every parameter
// is required and the optional ones are nullable, derived by
// tools.Tool.StrictParameters from the tools' own schemas.
package openaitools

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"

	"github.com/azsessions/azsessions"
	"github.com/azsessions/azsessions/tools"
)

// Toolset holds the tools and dispatches the model's tool calls to them by
// name. It is safe for concurrent use when its tools are (those of tools.New
// are).
type Toolset struct {
	list   []tools.Tool
	byName map[string]tools.Tool
	strict map[string][]byte // the strict schema of each tool, as JSON
}

// New returns a Toolset for ts (usually tools.New(session, options)). It
// fails when two tools share a name or a tool's Parameters is not a JSON
// object schema.
func New(ts []tools.Tool) (*Toolset, error) {
	s := &Toolset{byName: map[string]tools.Tool{}, strict: map[string][]byte{}}
	for _, t := range ts {
		if _, dup := s.byName[t.Name]; dup {
			return nil, fmt.Errorf("openaitools: two tools named %q", t.Name)
		}
		schema, err := t.StrictParameters()
		if err != nil {
			return nil, fmt.Errorf("openaitools: %w", err)
		}
		b, err := json.Marshal(schema)
		if err != nil {
			return nil, fmt.Errorf("openaitools: %s: %w", t.Name, err)
		}
		s.list = append(s.list, t)
		s.byName[t.Name] = t
		s.strict[t.Name] = b
	}
	return s, nil
}

// schema returns a fresh copy of the strict schema of the tool name.
func (s *Toolset) schema(name string) map[string]any {
	var m map[string]any
	_ = json.Unmarshal(s.strict[name], &m) // made by json.Marshal in New
	return m
}

// ChatCompletionTools returns the tools as strict function tools for
// openai.ChatCompletionNewParams.Tools, in the order of the tools given to
// New.
func (s *Toolset) ChatCompletionTools() []openai.ChatCompletionToolUnionParam {
	out := make([]openai.ChatCompletionToolUnionParam, 0, len(s.list))
	for _, t := range s.list {
		out = append(out, openai.ChatCompletionFunctionTool(openai.FunctionDefinitionParam{
			Name:        t.Name,
			Description: openai.String(t.Description),
			Parameters:  s.schema(t.Name),
			Strict:      openai.Bool(true),
		}))
	}
	return out
}

// ResponseTools returns the tools as strict function tools for
// responses.ResponseNewParams.Tools, in the order of the tools given to New.
func (s *Toolset) ResponseTools() []responses.ToolUnionParam {
	out := make([]responses.ToolUnionParam, 0, len(s.list))
	for _, t := range s.list {
		u := responses.ToolParamOfFunction(t.Name, s.schema(t.Name), true)
		u.OfFunction.Description = openai.String(t.Description)
		out = append(out, u)
	}
	return out
}

// answer is the result of one tool call.
type answer struct {
	text   string
	images []azsessions.Image
}

// call runs the tool name with the model's arguments. A model mistake (an
// unknown tool, bad arguments) is an answer; a service failure is an answer
// {"error": short safe text} and a non-nil error.
func (s *Toolset) call(ctx context.Context, name, arguments string, withImages bool) (answer, error) {
	t, ok := s.byName[name]
	if !ok {
		return answer{text: jsonError("unknown tool " + strconv.Quote(name) + "; the tools are " + strings.Join(s.names(), ", "))}, nil
	}
	var a answer
	if withImages {
		ctx = tools.WithImageFunc(ctx, func(img azsessions.Image) { a.images = append(a.images, img) })
	}
	out, err := t.Call(ctx, arguments)
	if err != nil {
		// err's text is short and holds no identifier nor token; its cause may.
		return answer{text: jsonError(err.Error())}, fmt.Errorf("openaitools: tool %s: %w", name, err)
	}
	a.text = out
	return a, nil
}

func (s *Toolset) names() []string {
	out := make([]string, len(s.list))
	for i, t := range s.list {
		out[i] = t.Name
	}
	return out
}

// ChatCompletionToolMessages runs the function tool calls of an assistant
// message (openai.ChatCompletionMessage.ToolCalls), one after the other, and
// returns one tool message per call, in order, to append to the conversation
// after the assistant message. Calls of other kinds (custom tools) and of
// unknown functions get a tool message with {"error": ...} so that the model
// can correct itself.
//
// When the service could not be used (transport failure, 401/403, 429, 5xx,
// context ended), the call's tool message holds {"error": text} with the
// short, safe text of the *tools.Error, and the returned error (errors.Join of
// each failed call's error, which wraps the *tools.Error) is non-nil. The
// messages are complete even then: send them to keep the conversation valid
// and let the model explain, or stop on the error. Chat Completions tool
// messages carry text only, so an image result is described (format, size,
// and where it was saved with tools.Options.LocalDir), not attached.
func (s *Toolset) ChatCompletionToolMessages(ctx context.Context, calls []openai.ChatCompletionMessageToolCallUnion) ([]openai.ChatCompletionMessageParamUnion, error) {
	out := make([]openai.ChatCompletionMessageParamUnion, 0, len(calls))
	var errs []error
	for _, c := range calls {
		if c.Type != "" && c.Type != "function" {
			out = append(out, openai.ToolMessage(jsonError("only function tools are available"), c.ID))
			continue
		}
		a, err := s.call(ctx, c.Function.Name, c.Function.Arguments, false)
		if err != nil {
			errs = append(errs, err)
		}
		out = append(out, openai.ToolMessage(a.text, c.ID))
	}
	return out, errors.Join(errs...)
}

// ResponseFunctionCallOutputs runs the function_call items of a response's
// output (responses.Response.Output), one after the other, and returns one
// function_call_output item per call, in order, to send as input of the next
// request (with PreviousResponseID set, or after the output items in a
// stateless conversation). Output items of other types are ignored.
//
// An image result is attached to its function_call_output as an input_image
// (a data: URL) after the text answer. Errors are as for
// ChatCompletionToolMessages: the items are complete even when the error is
// non-nil.
func (s *Toolset) ResponseFunctionCallOutputs(ctx context.Context, output []responses.ResponseOutputItemUnion) ([]responses.ResponseInputItemUnionParam, error) {
	var out []responses.ResponseInputItemUnionParam
	var errs []error
	for _, item := range output {
		if item.Type != "function_call" {
			continue
		}
		fc := item.AsFunctionCall()
		a, err := s.call(ctx, fc.Name, fc.Arguments, true)
		if err != nil {
			errs = append(errs, err)
		}
		var in responses.ResponseInputItemUnionParam
		if len(a.images) == 0 {
			in = responses.ResponseInputItemParamOfFunctionCallOutput(a.text)
		} else {
			list := responses.ResponseFunctionCallOutputItemListParam{
				{OfInputText: &responses.ResponseInputTextContentParam{Text: a.text}},
			}
			for _, img := range a.images {
				list = append(list, responses.ResponseFunctionCallOutputItemUnionParam{
					OfInputImage: &responses.ResponseInputImageContentParam{ImageURL: openai.String(DataURL(img))},
				})
			}
			in = responses.ResponseInputItemParamOfFunctionCallOutput(list)
		}
		in.OfFunctionCallOutput.CallID = openai.String(fc.CallID)
		out = append(out, in)
	}
	return out, errors.Join(errs...)
}

// DataURL returns img as a data: URL, such as "data:image/png;base64,iVBO...".
func DataURL(img azsessions.Image) string {
	return "data:" + tools.ImageMediaType(img.Format) + ";base64," + base64.StdEncoding.EncodeToString(img.Data)
}

// jsonError returns {"error": msg}.
func jsonError(msg string) string {
	b, _ := json.Marshal(map[string]string{"error": msg}) // a string map always encodes
	return string(b)
}
