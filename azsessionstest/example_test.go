package azsessionstest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/fake"

	"github.com/azsessions/azsessions"
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

// The default executor runs no code: it prints the code back, so a test can
// check what its subject sent. Canned answers by code; for real Python use
// emulator.NewSandboxExecutor.
func ExampleDefaultExecutor() {
	srv, err := azsessionstest.NewServer(nil)
	if err != nil {
		panic(err)
	}
	defer srv.Close()
	resp, err := srv.Client().NewSession().Execute(context.Background(), "x = 6\nx * 7", nil)
	fmt.Printf("%v %s %q\n", err, resp.Status, resp.Stdout)
	// Output: <nil> Succeeded "x = 6\nx * 7\n"
}

// Canned answers each cell by its code.
func ExampleCanned() {
	srv, err := azsessionstest.NewServer(&azsessionstest.Options{Options: emulator.Options{
		Executor: azsessionstest.Canned(map[string]emulator.ExecutionResult{
			"6 * 7": {Value: json.RawMessage("42")},
		}),
	}})
	if err != nil {
		panic(err)
	}
	defer srv.Close()
	session := srv.Client().NewSession()
	resp, _ := session.Execute(context.Background(), "6 * 7", nil)
	fmt.Println(resp.Status, resp.ResultText())
	resp, _ = session.Execute(context.Background(), "6 * 8", nil)
	fmt.Println(resp.Status, resp.Err())
	// Output:
	// Succeeded 42
	// Failed azsessions: execution failed: NotImplementedError: azsessionstest.Canned has no answer for this code
}

// The code under test builds its own client from an endpoint and a
// credential; ClientOptions makes that constructor reach the fake, over TLS
// with azcore's fake credential.
func ExampleServer_ClientOptions() {
	srv, err := azsessionstest.NewServer(&azsessionstest.Options{TLS: true})
	if err != nil {
		panic(err)
	}
	defer srv.Close()

	client, err := azsessions.NewClient(srv.Endpoint(), &fake.TokenCredential{}, srv.ClientOptions())
	if err != nil {
		panic(err)
	}
	up, err := client.NewSession().UploadFile(context.Background(), "a.txt", strings.NewReader("hi"), nil)
	fmt.Println(err, up.Name, up.SizeInBytes)
	// Output: <nil> a.txt 2
}
