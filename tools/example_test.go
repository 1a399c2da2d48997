package tools_test

import (
	"context"
	"fmt"
	"time"

	"github.com/azsessions/azsessions/azsessionstest"
	"github.com/azsessions/azsessions/emulator"
	"github.com/azsessions/azsessions/tools"
)

// ExampleNew dispatches a model's tool calls by name. The session runs on the
// azsessionstest fake with a scripted executor here; with a real pool use
// azsessions.NewClient(endpoint, credential, nil).
func ExampleNew() {
	srv, _ := azsessionstest.NewServer(&azsessionstest.Options{Options: emulator.Options{Executor: emulator.ScriptedExecutor(
		func(ctx context.Context, code string) emulator.ExecutionResult {
			return emulator.ExecutionResult{Stdout: "12.4\n", Duration: 26 * time.Millisecond}
		})}})
	defer srv.Close()
	client := srv.Client()

	byName := map[string]tools.Tool{}
	for _, t := range tools.New(client.NewSession(), nil) {
		byName[t.Name] = t
		fmt.Println(t.Name)
	}

	// what a model sent
	name, arguments := "code_interpreter", `{"python_code": "`+"```python\\nprint(max(temps))\\n```"+`"}`
	out, err := byName[name].Call(context.Background(), arguments)
	if err != nil {
		out = err.Error() // short and safe to show the model
	}
	fmt.Println(out)
	out, _ = byName["list_files"].Call(context.Background(), `{}`)
	fmt.Println(out)
	// Output:
	// code_interpreter
	// list_files
	// {"status":"Succeeded","stdout":"12.4\n","stderr":"","result":"","executionTimeInMilliseconds":26}
	// []
}
