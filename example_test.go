package azsessions_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"

	"github.com/azsessions/azsessions"
	"github.com/azsessions/azsessions/azsessionstest"
	"github.com/azsessions/azsessions/emulator"
)

// A client for a real session pool, authenticated with azidentity. The caller
// needs the "Azure ContainerApps Session Executor" role on the pool.
func ExampleNewClient() {
	endpoint := os.Getenv("AZURE_POOL_MANAGEMENT_ENDPOINT")
	if endpoint == "" {
		return // e.g. https://eastus.dynamicsessions.io/subscriptions/<sub>/resourceGroups/<rg>/sessionPools/<pool>
	}
	cred, err := azidentity.NewDefaultAzureCredential(nil)
	if err != nil {
		log.Fatal(err)
	}
	client, err := azsessions.NewClient(endpoint, cred, &azsessions.ClientOptions{
		ClientOptions: azcore.ClientOptions{APIVersion: azsessions.APIVersion20251002Preview},
	})
	if err != nil {
		log.Fatal(err)
	}
	resp, err := client.NewSession().Execute(context.Background(), "6 * 7", nil)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(resp.Status, string(resp.Result))
}

// A client for the local emulator (go run ./cmd/azsessions-emulator), which
// needs no token.
func ExampleNewClientWithNoCredential() {
	srv := startFake()
	defer srv.Close()

	client, err := azsessions.NewClientWithNoCredential(srv.Endpoint(), nil)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(client.APIVersion())
	// Output: 2025-10-02-preview
}

// The walkthrough's first task: run code and read its result. A program that
// fails comes back as data the caller (or a model) can read and fix.
func ExampleSession_Execute() {
	srv := startFake()
	defer srv.Close()
	session := srv.Client().NewSession()
	ctx := context.Background()

	resp, err := session.Execute(ctx, "x = 6\nx * 7", nil)
	if err != nil {
		log.Fatal(err) // transport, auth or service error
	}
	fmt.Println(resp.Status, string(resp.Result))

	resp, err = session.Execute(ctx, `raise ValueError("bad input")`, nil)
	fmt.Println(err, resp.Status, resp.Err())
	// Output:
	// Succeeded 42
	// <nil> Failed azsessions: execution failed: ValueError: bad input
}

// The walkthrough's second and third tasks: upload a file, list the session's
// files and download one atomically.
func ExampleSession_UploadFile() {
	srv := startFake()
	defer srv.Close()
	session := srv.Client().NewSession()
	ctx := context.Background()

	f, err := os.Open(filepath.Join("testdata", "TemperatureData.csv"))
	if err != nil {
		log.Fatal(err)
	}
	defer f.Close()
	up, err := session.UploadFile(ctx, "TemperatureData.csv", f, nil)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(up.FullPath(), up.SizeInBytes)

	pager := session.NewListFilesPager(nil)
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			log.Fatal(err)
		}
		for _, file := range page.Files {
			fmt.Println(file.Name, file.SizeInBytes, file.FullPath())
		}
	}

	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	dl, err := session.DownloadFileToPath(ctx, "/mnt/data/TemperatureData.csv", filepath.Join(dir, "local.csv"), nil)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(dl.Size)
	// Output:
	// /mnt/data/TemperatureData.csv 529
	// TemperatureData.csv 529 /mnt/data/TemperatureData.csv
	// 529
}

// Input errors are reported before any I/O and match sentinel errors.
func ExampleErrInvalidFileName() {
	srv := startFake()
	defer srv.Close()
	_, err := srv.Client().NewSession().UploadFile(context.Background(), "../etc/passwd", strings.NewReader("x"), nil)
	fmt.Println(errors.Is(err, azsessions.ErrInvalidFileName))
	// Output: true
}

// A long execution can run asynchronously; the poller follows it.
func ExampleSession_BeginExecute() {
	srv := startFake()
	defer srv.Close()
	ctx := context.Background()
	poller, err := srv.Client().NewSession().BeginExecute(ctx, "print(1 + 1)", nil)
	if err != nil {
		log.Fatal(err)
	}
	// PollUntilDone honours a Retry-After on a running execution; without
	// one azcore waits Frequency, 30 s by default. Azure sends none, so poll
	// every second:
	resp, err := poller.PollUntilDone(ctx, &runtime.PollUntilDoneOptions{Frequency: time.Second})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Print(resp.Status, " ", resp.Stdout)
	// Output: Succeeded 2
}

// A session ends after its pool's cooldown without calls, and the same
// identifier then names a fresh session without the old files and
// variables. Session.Get tells: IsSessionNotFound, then set the state up
// again.
func ExampleSession_Get_expired() {
	srv := startFake()
	defer srv.Close()
	ctx := context.Background()
	session := srv.Client().NewSession()
	setUp := func() {
		if _, err := session.UploadFile(ctx, "input.csv", strings.NewReader("a,b\n1,2\n"), nil); err != nil {
			log.Fatal(err)
		}
	}
	setUp()

	srv.Advance(2 * time.Hour) // the fake's clock passes the cooldown

	_, err := session.Get(ctx, nil)
	switch {
	case azsessions.IsSessionNotFound(err):
		fmt.Println("session expired: setting it up again")
		setUp()
	case err != nil:
		log.Fatal(err)
	}
	for f, err := range session.Files(ctx, nil) {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(f.FullPath())
	}
	// Output:
	// session expired: setting it up again
	// /mnt/data/input.csv
}

// Upload a local file by path; range over the session's files.
func ExampleSession_UploadFileFromPath() {
	srv := startFake()
	defer srv.Close()
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	local := filepath.Join(dir, "report.txt")
	_ = os.WriteFile(local, []byte("hello"), 0o600)

	session := srv.Client().NewSession()
	if _, err := session.UploadFileFromPath(ctx, "", local, nil); err != nil {
		log.Fatal(err)
	}
	for f, err := range session.Files(ctx, nil) {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(f.Name, f.SizeInBytes)
	}
	// Output: report.txt 5
}

// startFake starts the in-process fake. It runs no Python: the cells these
// examples send get canned answers (those of CPython); other code fails
// with a NotImplementedError. For real Python, give the fake
// emulator.NewSandboxExecutor.
func startFake() *azsessionstest.Server {
	srv, err := azsessionstest.NewServer(&azsessionstest.Options{Options: emulator.Options{
		Executor: azsessionstest.Canned(map[string]emulator.ExecutionResult{
			"x = 6\nx * 7":                  {Value: json.RawMessage(`42`)},
			"6 * 7":                         {Value: json.RawMessage(`42`)},
			`raise ValueError("bad input")`: {Status: emulator.Failed, Stderr: "Traceback (most recent call last):\n  Cell In[2], line 1\nValueError: bad input\n"},
			"print(1 + 1)":                  {Stdout: "2\n", Value: json.RawMessage(`""`)},
		}),
	}})
	if err != nil {
		log.Fatal(err)
	}
	return srv
}
