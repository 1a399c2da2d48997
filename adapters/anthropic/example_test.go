package anthropictools_test

import (
	"context"
	"fmt"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	anthropictools "github.com/azsessions/azsessions/adapters/anthropic"
	"github.com/azsessions/azsessions/azsessionstest"
	"github.com/azsessions/azsessions/emulator"
	"github.com/azsessions/azsessions/tools"
)

// A Messages API tool-use loop. The model here is a local fake speaking the
// Messages API and the session runs on the azsessionstest fake (canned
// answers); with real services use anthropic.NewClient() (it reads
// ANTHROPIC_API_KEY) and azsessions.NewClient(endpoint, credential, nil).
func Example() {
	model := newFakeModel(tools.NameCodeInterpreter, `{"python_code":"x = 6\nprint(x * 7)"}`)
	defer model.Close()
	// the fake pool answers the code the model will send (no Python runs here)
	pool, err := azsessionstest.NewServer(&azsessionstest.Options{Options: emulator.Options{Executor: azsessionstest.Canned(map[string]emulator.ExecutionResult{
		"x = 6\nprint(x * 7)": {Stdout: "42\n"},
	})}})
	if err != nil {
		panic(err)
	}
	defer pool.Close()
	ctx := context.Background()

	ts, err := anthropictools.New(tools.New(pool.Client().NewSession(), nil))
	if err != nil {
		panic(err)
	}
	client := anthropic.NewClient(option.WithBaseURL(model.URL), option.WithAPIKey("sk-ant-fake"))
	params := anthropic.MessageNewParams{
		Model:     anthropic.ModelClaudeSonnet4_5,
		MaxTokens: 1024,
		Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("What is 6 times 7? Use Python."))},
		Tools:     ts.Tools(),
	}
	for range 10 {
		msg, err := client.Messages.New(ctx, params)
		if err != nil {
			panic(err)
		}
		params.Messages = append(params.Messages, msg.ToParam())
		results, err := ts.ToolResults(ctx, msg.Content)
		if err != nil {
			// the service could not be used; results tell the model so
			fmt.Println("tool error:", err)
		}
		if len(results) == 0 {
			for _, block := range msg.Content {
				fmt.Println(block.Text)
			}
			break
		}
		params.Messages = append(params.Messages, anthropic.NewUserMessage(results...))
	}
	// Output:
	// The tool said: {"status":"Succeeded","stdout":"42\n","stderr":"","result":"","executionTimeInMilliseconds":0}
}
