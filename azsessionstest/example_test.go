package azsessionstest_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/azsessions/azsessions/azsessionstest"
	"github.com/azsessions/azsessions/emulator"
)

// A unit test of code that uses azsessions: the fake server answers with a
// scripted executor, and Client is a real SDK client pointed at it. In a test
// function, azsessionstest.Start(t, opts) also registers Close with t.Cleanup.
func Example() {
	srv, _ := azsessionstest.NewServer(&azsessionstest.Options{Options: emulator.Options{
		Executor: emulator.ScriptedExecutor(func(ctx context.Context, code string) emulator.ExecutionResult {
			return emulator.ExecutionResult{Stdout: "ran: " + code + "\n"}
		}),
	}})
	defer srv.Close()

	resp, err := srv.Client().NewSession().Execute(context.Background(), "print('hi')", nil)
	fmt.Println(err, resp.Status, strings.TrimSpace(resp.Stdout), srv.Executions())
	// Output: <nil> Succeeded ran: print('hi') 1
}

// The default executor runs a tiny Python subset, enough for simple tests.
func ExampleDefaultExecutor() {
	srv, err := azsessionstest.NewServer(nil)
	if err != nil {
		panic(err)
	}
	defer srv.Close()
	resp, err := srv.Client().NewSession().Execute(context.Background(), "x = 6\nx * 7", nil)
	fmt.Println(err, resp.Status, string(resp.Result))
	// Output: <nil> Succeeded 42
}
