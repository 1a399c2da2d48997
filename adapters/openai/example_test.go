package openaitools_test

import (
	"context"
	"fmt"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	openaitools "github.com/azsessions/azsessions/adapters/openai"
	"github.com/azsessions/azsessions/azsessionstest"
	"github.com/azsessions/azsessions/emulator"
	"github.com/azsessions/azsessions/tools"
)

// A Chat Completions tool-call loop. The model here is a local fake speaking
// OpenAI's wire format and the session runs on the azsessionstest fake (no
// Python: a canned answer for the model's cell); with real services use openai.NewClient() (it reads
// OPENAI_API_KEY) and azsessions.NewClient(endpoint, credential, nil).
func Example() {
	model := newFakeModel(tools.NameCodeInterpreter, `{"python_code":"x = 6\nprint(x * 7)"}`)
	defer model.Close()
	pool, err := azsessionstest.NewServer(&azsessionstest.Options{Options: emulator.Options{
		Executor: azsessionstest.Canned(map[string]emulator.ExecutionResult{"x = 6\nprint(x * 7)": {Stdout: "42\n"}}),
	}})
	if err != nil {
		panic(err)
	}
	defer pool.Close()
	ctx := context.Background()

	ts, err := openaitools.New(tools.New(pool.Client().NewSession(), nil))
	if err != nil {
		panic(err)
	}
	client := openai.NewClient(option.WithBaseURL(model.URL), option.WithAPIKey("sk-fake"))
	params := openai.ChatCompletionNewParams{
		Model:    openai.ChatModelGPT4oMini,
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("What is 6 times 7? Use Python.")},
		Tools:    ts.ChatCompletionTools(),
	}
	for range 10 {
		completion, err := client.Chat.Completions.New(ctx, params)
		if err != nil {
			panic(err)
		}
		msg := completion.Choices[0].Message
		if len(msg.ToolCalls) == 0 {
			fmt.Println(msg.Content)
			break
		}
		params.Messages = append(params.Messages, msg.ToParam())
		results, err := ts.ChatCompletionToolMessages(ctx, msg.ToolCalls)
		if err != nil {
			// the service could not be used; results tell the model so
			fmt.Println("tool error:", err)
		}
		params.Messages = append(params.Messages, results...)
	}
	// Output:
	// The tool said: {"status":"Succeeded","stdout":"42\n","stderr":"","result":"","executionTimeInMilliseconds":0}
}
