package langchaingotools_test

import (
	"context"
	"fmt"

	"github.com/tmc/langchaingo/agents"
	"github.com/tmc/langchaingo/chains"
	"github.com/tmc/langchaingo/llms/openai"

	langchaingotools "github.com/azsessions/azsessions/adapters/langchaingo"
	"github.com/azsessions/azsessions/azsessionstest"
	"github.com/azsessions/azsessions/emulator"
	"github.com/azsessions/azsessions/tools"
)

// langchaingo's OpenAI functions agent with the code interpreter. The model
// here is a local fake speaking OpenAI's wire format and the session runs on
// the azsessionstest fake (canned answers); with real services use
// openai.New() (it reads OPENAI_API_KEY) and azsessions.NewClient(endpoint,
// credential, nil).
func Example() {
	model := newFakeModel(tools.NameCodeInterpreter, `{"__arg1":"x = 6\nprint(x * 7)"}`)
	defer model.Close()
	// the fake pool answers the code the model will send (no Python runs here)
	pool, err := azsessionstest.NewServer(&azsessionstest.Options{Options: emulator.Options{Executor: azsessionstest.Canned(map[string]emulator.ExecutionResult{
		"x = 6\nprint(x * 7)": {Stdout: "42\n"},
	})}})
	if err != nil {
		panic(err)
	}
	defer pool.Close()

	lc, err := langchaingotools.New(tools.New(pool.Client().NewSession(), nil), nil)
	if err != nil {
		panic(err)
	}
	llm, err := openai.New(openai.WithBaseURL(model.URL), openai.WithToken("sk-fake"), openai.WithModel("gpt-4o-mini"))
	if err != nil {
		panic(err)
	}
	executor := agents.NewExecutor(agents.NewOpenAIFunctionsAgent(llm, lc), agents.WithMaxIterations(5))
	answer, err := chains.Run(context.Background(), executor, "What is 6 times 7? Use Python.")
	if err != nil {
		panic(err) // a *tools.Error when the service could not be used
	}
	fmt.Println(answer)
	// Output:
	// The tool said: {"status":"Succeeded","stdout":"42\n","stderr":"","result":"","executionTimeInMilliseconds":0}
}
