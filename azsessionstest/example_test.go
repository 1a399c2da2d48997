package azsessionstest_test

import (
	"context"
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
