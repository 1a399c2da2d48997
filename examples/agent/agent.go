package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/openai/openai-go/v3"

	openaitools "github.com/azsessions/azsessions/adapters/openai"
	"github.com/azsessions/azsessions/tools"
)

// agent answers one question at a time, keeping the conversation.
type agent interface {
	Chat(ctx context.Context, question string) (string, error)
}

// step is one tool call of the transcript.
type step struct {
	Task        int
	Action      string
	Input       string
	Observation string
	// Err is the tool's Go error (a service or transport failure), if any.
	Err error
}

// printer prints a ReAct-style transcript like the LlamaIndex walkthrough
// (Thought / Action / Action Input / Observation / Answer) and records the
// tool calls.
type printer struct {
	w     io.Writer
	task  int
	steps []step
}

func (p *printer) thought(s string) {
	if s = strings.TrimSpace(s); s != "" {
		fmt.Fprintf(p.w, "Thought: %s\n", s)
	}
}

func (p *printer) answer(s string) { fmt.Fprintf(p.w, "Answer: %s\n", strings.TrimSpace(s)) }

// toolbox dispatches tool calls by name and prints them.
type toolbox struct {
	byName map[string]tools.Tool
	list   []tools.Tool
	p      *printer
}

func newToolbox(ts []tools.Tool, p *printer) *toolbox {
	b := &toolbox{byName: map[string]tools.Tool{}, list: ts, p: p}
	for _, t := range ts {
		b.byName[t.Name] = t
	}
	return b
}

// call runs the tool name with the model's arguments and returns the
// observation for the model: the tool's answer, or the short error text of
// a service failure.
func (b *toolbox) call(ctx context.Context, name, arguments string) string {
	return b.callAs(ctx, "Action", "Action Input", "Observation", name, arguments)
}

// programCall is call for a step the program takes itself (not the model).
func (b *toolbox) programCall(ctx context.Context, name, arguments string) string {
	return b.callAs(ctx, "Program", "Program Input", "Result", name, arguments)
}

func (b *toolbox) callAs(ctx context.Context, action, input, observation, name, arguments string) string {
	fmt.Fprintf(b.p.w, "%s: %s\n%s: %s\n", action, name, input, arguments)
	st := step{Task: b.p.task, Action: name, Input: arguments}
	t, ok := b.byName[name]
	if !ok {
		st.Observation = jsonError("unknown tool " + strconv.Quote(name))
	} else {
		out, err := t.Call(ctx, arguments)
		if err != nil {
			// err's text is short and safe for the model (no identifier, no token)
			out = jsonError(err.Error())
			st.Err = err
		}
		st.Observation = out
	}
	fmt.Fprintf(b.p.w, "%s: %s\n", observation, st.Observation)
	b.p.steps = append(b.p.steps, st)
	return st.Observation
}

const systemPrompt = `You are a data assistant with a Python code interpreter. ` +
	`Use the tools to compute answers instead of guessing: run code with code_interpreter, find uploaded files with list_files (they are in /mnt/data). ` +
	`When code fails, read stderr, fix the code and run it again. Answer briefly in the user's language.`

// modelAgent is driven by a chat completions model with function calling;
// the openai-go adapter (adapters/openai) makes the tool definitions and runs
// the model's tool calls.
type modelAgent struct {
	client   openai.Client
	model    string
	box      *toolbox
	ts       *openaitools.Toolset
	messages []openai.ChatCompletionMessageParamUnion
	maxSteps int
}

func newModelAgent(client openai.Client, model string, box *toolbox) (*modelAgent, error) {
	ts, err := openaitools.New(box.list)
	if err != nil {
		return nil, err
	}
	return &modelAgent{
		client: client, model: model, box: box, ts: ts, maxSteps: 10,
		messages: []openai.ChatCompletionMessageParamUnion{openai.SystemMessage(systemPrompt)},
	}, nil
}

// Chat runs the ReAct loop: ask the model; run the tool calls it makes and
// hand back the observations; stop at its first answer without tool calls.
func (a *modelAgent) Chat(ctx context.Context, question string) (string, error) {
	a.messages = append(a.messages, openai.UserMessage(question))
	for range a.maxSteps {
		completion, err := a.client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
			Model:    openai.ChatModel(a.model),
			Messages: a.messages,
			Tools:    a.ts.ChatCompletionTools(),
		})
		if err != nil {
			return "", fmt.Errorf("chat completion: %w", err)
		}
		if len(completion.Choices) == 0 {
			return "", errors.New("chat completion: no choices")
		}
		msg := completion.Choices[0].Message
		a.messages = append(a.messages, msg.ToParam())
		if len(msg.ToolCalls) == 0 {
			a.box.p.answer(msg.Content)
			return msg.Content, nil
		}
		a.box.p.thought(msg.Content)
		for _, tc := range msg.ToolCalls {
			fmt.Fprintf(a.box.p.w, "Action: %s\nAction Input: %s\n", tc.Function.Name, tc.Function.Arguments)
			results, err := a.ts.ChatCompletionToolMessages(ctx, []openai.ChatCompletionMessageToolCallUnion{tc})
			obs := ""
			if len(results) == 1 && results[0].OfTool != nil {
				obs = results[0].OfTool.Content.OfString.Value
			}
			fmt.Fprintf(a.box.p.w, "Observation: %s\n", obs)
			a.box.p.steps = append(a.box.p.steps, step{Task: a.box.p.task, Action: tc.Function.Name, Input: tc.Function.Arguments, Observation: obs, Err: err})
			a.messages = append(a.messages, results...)
		}
	}
	return "", fmt.Errorf("no answer after %d steps", a.maxSteps)
}

// jsonError returns {"error": msg}.
func jsonError(msg string) string { return marshal(map[string]string{"error": msg}) }

// marshal encodes v as compact JSON without HTML escaping ("<" stays "<").
func marshal(v any) string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
	return strings.TrimSuffix(b.String(), "\n")
}
