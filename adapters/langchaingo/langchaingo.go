// Package langchaingotools adapts the azsessions agent tools (package
// github.com/azsessions/azsessions/tools) to langchaingo
// (github.com/tmc/langchaingo): each is a tools.Tool (Name, Description,
// Call(ctx, input string)) that its agents (agents.NewOpenAIFunctionsAgent,
// agents.NewOneShotAgent, agents.NewConversationalAgent) and executor use. It
// only translates: what the tools do and answer is documented in package
// github.com/azsessions/azsessions/tools.
//
//	lc, err := langchaingotools.New(tools.New(session, nil), nil)
//	agent := agents.NewOpenAIFunctionsAgent(llm, lc)
//	answer, err := chains.Run(ctx, agents.NewExecutor(agent), "What is 2**100?")
//
// langchaingo's agents hand a tool one string: the OpenAI functions agent
// the model's "__arg1", the ReAct agents the text after "Action Input:". A
// tool therefore takes either a JSON object of its arguments
// ({"python_code": "..."}) or, as plain text, the value of its first required
// argument (the Python code for code_interpreter, the local file for
// upload_file); list_files ignores its input. Each description ends with a
// sentence saying so.
package langchaingotools

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	lctools "github.com/tmc/langchaingo/tools"

	"github.com/azsessions/azsessions/tools"
)

// Options contains the optional parameters of New.
type Options struct {
	// ErrorsToModel makes a tool answer a service failure (transport, 401/403,
	// 429, 5xx, context ended) to the model as {"error": "<short safe
	// text>"} with a nil error, so that the agent goes on. By default the
	// *tools.Error is returned and langchaingo's executor stops the run with
	// it.
	ErrorsToModel bool
	// OnError, when set, receives every service failure (the tool's name and
	// the *tools.Error, whose cause may contain the session identifier: for
	// logs only), whether or not ErrorsToModel is set.
	OnError func(tool string, err error)
}

// Tool is one azsessions tool as a langchaingo tools.Tool.
type Tool struct {
	t         tools.Tool
	opts      Options
	props     map[string]bool // the argument names of the schema
	plainArg  string          // the argument a plain-text input is, "" for none
	inputHelp string
}

var _ lctools.Tool = (*Tool)(nil)

// New returns ts (usually tools.New(session, options)) as langchaingo tools,
// in order. opts may be nil. It fails when a tool's Parameters is not a JSON
// object schema.
func New(ts []tools.Tool, opts *Options) ([]lctools.Tool, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	out := make([]lctools.Tool, 0, len(ts))
	for _, t := range ts {
		lt, err := newTool(t, o)
		if err != nil {
			return nil, err
		}
		out = append(out, lt)
	}
	return out, nil
}

func newTool(t tools.Tool, o Options) (*Tool, error) {
	schema, err := t.ObjectSchema()
	if err != nil {
		return nil, fmt.Errorf("langchaingotools: %w", err)
	}
	lt := &Tool{t: t, opts: o, props: map[string]bool{}}
	var optional []string // sorted, as PropertyNames
	for _, name := range schema.PropertyNames {
		lt.props[name] = true
		if !slices.Contains(schema.Required, name) {
			optional = append(optional, name)
		}
	}
	if len(schema.Required) > 0 {
		lt.plainArg = schema.Required[0]
	}
	switch {
	case len(schema.PropertyNames) == 0:
		lt.inputHelp = "Input: none (send an empty string)."
	case len(schema.PropertyNames) == 1 && lt.plainArg != "":
		lt.inputHelp = fmt.Sprintf("Input: the %s as plain text.", lt.plainArg)
	default:
		var fields []string
		for _, r := range schema.Required {
			fields = append(fields, fmt.Sprintf("%q: string", r))
		}
		for _, n := range optional {
			fields = append(fields, fmt.Sprintf("%q: string (optional)", n))
		}
		lt.inputHelp = "Input: a JSON object {" + strings.Join(fields, ", ") + "}"
		if lt.plainArg != "" {
			lt.inputHelp += ", or just the " + lt.plainArg + " as plain text"
		}
		lt.inputHelp += "."
	}
	return lt, nil
}

// Name returns the tool's name, such as "code_interpreter".
func (l *Tool) Name() string { return l.t.Name }

// Description returns the tool's description followed by a sentence on the
// input it takes.
func (l *Tool) Description() string { return l.t.Description + " " + l.inputHelp }

// Call runs the tool with input: a JSON object of its arguments, or the
// plain-text value of its first required argument (see the package
// documentation). It returns the tool's answer (JSON text); a failing
// program or a mistake of the model is an answer with a nil error. A service
// failure is a *tools.Error (whose text is short and safe to show the model),
// or the answer {"error": text} with Options.ErrorsToModel.
func (l *Tool) Call(ctx context.Context, input string) (string, error) {
	out, err := l.t.Call(ctx, l.arguments(input))
	if err != nil {
		if l.opts.OnError != nil {
			l.opts.OnError(l.t.Name, err)
		}
		if l.opts.ErrorsToModel {
			b, _ := json.Marshal(map[string]string{"error": err.Error()}) // a string map always encodes
			return string(b), nil
		}
		return "", err
	}
	return out, nil
}

// arguments turns the agent's input into the tool's JSON arguments. A JSON
// object naming at least one of the tool's arguments is taken as is (a Python
// dict literal such as {"a": 1} is code, not arguments); anything else is
// the value of the first required argument.
func (l *Tool) arguments(input string) string {
	if len(l.props) == 0 {
		return "{}"
	}
	trimmed := strings.TrimSpace(input)
	if strings.HasPrefix(trimmed, "{") {
		var m map[string]json.RawMessage
		if json.Unmarshal([]byte(trimmed), &m) == nil {
			for k := range m {
				if l.props[k] {
					return trimmed
				}
			}
		}
	}
	if l.plainArg == "" {
		return trimmed
	}
	b, _ := json.Marshal(map[string]string{l.plainArg: input}) // a string map always encodes
	return string(b)
}
