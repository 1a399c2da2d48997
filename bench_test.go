package azsessions_test

// Benchmarks of the SDK against the in-process fake (azsessionstest) with a
// trivial scripted executor, so that they measure the client and the HTTP
// stack, not Python. See BENCHMARKS.md for how to run them and the results.
//
// None of them asserts a duration: they report numbers. The heavy cases (1 GiB
// transfers, 1,000 concurrent sessions) run only with AZSESSIONS_BENCH_LARGE=1
// (make bench sets it); without it smaller sizes keep `-benchtime 1x` fast.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	azruntime "github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"

	"github.com/azsessions/azsessions"
	"github.com/azsessions/azsessions/azsessionstest"
	"github.com/azsessions/azsessions/emulator"
	"github.com/azsessions/azsessions/internal/testpayload"
	"github.com/azsessions/azsessions/internal/uuid"
)

// benchLarge reports whether the heavy cases run (AZSESSIONS_BENCH_LARGE=1).
func benchLarge() bool { return os.Getenv("AZSESSIONS_BENCH_LARGE") == "1" }

// constExecutor answers 2 to every cell, and "mkfiles N" / "mkfile NAME SIZE"
// create files in the session's data directory (for the listing and
// download benchmarks).
func constExecutor() emulator.Executor {
	return emulator.ScriptedExecutor(func(ctx context.Context, code string) emulator.ExecutionResult {
		f := strings.Fields(code)
		switch {
		case len(f) == 2 && f[0] == "mkfiles":
			n, _ := strconv.Atoi(f[1])
			dir := emulator.DataDirFromContext(ctx)
			for i := range n {
				if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("file-%05d.csv", i)), []byte("a,b\n1,2\n"), 0o644); err != nil {
					return emulator.ExecutionResult{Status: emulator.Failed, Stderr: err.Error()}
				}
			}
		case len(f) == 3 && f[0] == "mkfile":
			size, _ := strconv.ParseInt(f[2], 10, 64)
			if err := testpayload.WriteFile(filepath.Join(emulator.DataDirFromContext(ctx), f[1]), size); err != nil {
				return emulator.ExecutionResult{Status: emulator.Failed, Stderr: err.Error()}
			}
		}
		return emulator.ExecutionResult{Value: json.RawMessage("2")}
	})
}

func benchServer(b *testing.B, opts azsessionstest.Options) *azsessionstest.Server {
	b.Helper()
	if opts.Executor == nil {
		opts.Executor = constExecutor()
	}
	srv := azsessionstest.Start(b, &opts)
	b.Cleanup(func() { srv.HTTPClient().CloseIdleConnections() })
	return srv
}

// executeBody and executeAnswer are the wire shapes of POST executions
// (2025-10-02-preview), written out as a hand-written client would.
type executeBody struct {
	CodeInputType    string `json:"codeInputType"`
	ExecutionType    string `json:"executionType"`
	Code             string `json:"code"`
	TimeoutInSeconds int32  `json:"timeoutInSeconds"`
}

type executeAnswer struct {
	ID         string `json:"id"`
	Identifier string `json:"identifier"`
	Status     string `json:"status"`
	Result     *struct {
		Stdout                      string          `json:"stdout"`
		Stderr                      string          `json:"stderr"`
		ExecutionResult             json.RawMessage `json:"executionResult"`
		ExecutionTimeInMilliseconds *int64          `json:"executionTimeInMilliseconds"`
	} `json:"result"`
}

// BenchmarkExecuteRoundTrip runs "1+1" three ways against the same fake (a
// scripted executor answering 2): raw net/http + encoding/json, the same
// request through a bare azcore pipeline (the floor of any azcore-based
// client), and Session.Execute. Compare the sub-benchmarks' medians.
func BenchmarkExecuteRoundTrip(b *testing.B) {
	srv := benchServer(b, azsessionstest.Options{})
	const ident = "bench-roundtrip"
	execURL := srv.Endpoint() + "/executions?api-version=" + azsessions.DefaultAPIVersion + "&identifier=" + ident
	body := executeBody{CodeInputType: "Inline", ExecutionType: "Synchronous", Code: "1+1", TimeoutInSeconds: 220}
	ctx := context.Background()
	check := func(b *testing.B, status string, result json.RawMessage) {
		if status != "Succeeded" || string(result) != "2" {
			b.Fatalf("unexpected answer: %s %s", status, result)
		}
	}

	b.Run("raw", func(b *testing.B) {
		hc := srv.HTTPClient()
		b.ReportAllocs()
		for b.Loop() {
			buf, err := json.Marshal(body)
			if err != nil {
				b.Fatal(err)
			}
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, execURL, bytes.NewReader(buf))
			if err != nil {
				b.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json")
			req.Header.Set("operation-id", uuid.New())
			resp, err := hc.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			var ans executeAnswer
			err = json.NewDecoder(resp.Body).Decode(&ans)
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if err != nil || resp.StatusCode != http.StatusOK || ans.Result == nil {
				b.Fatal(resp.StatusCode, err)
			}
			check(b, ans.Status, ans.Result.ExecutionResult)
		}
	})

	b.Run("azcore", func(b *testing.B) {
		client, err := azcore.NewClient("bench", "v0.0.1", azruntime.PipelineOptions{}, &policy.ClientOptions{Transport: srv.HTTPClient()})
		if err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for b.Loop() {
			req, err := azruntime.NewRequest(ctx, http.MethodPost, execURL)
			if err != nil {
				b.Fatal(err)
			}
			req.Raw().Header.Set("Accept", "application/json")
			req.Raw().Header.Set("operation-id", uuid.New())
			if err := azruntime.MarshalAsJSON(req, body); err != nil {
				b.Fatal(err)
			}
			resp, err := client.Pipeline().Do(req)
			if err != nil {
				b.Fatal(err)
			}
			if !azruntime.HasStatusCode(resp, http.StatusOK) {
				b.Fatal(azruntime.NewResponseError(resp))
			}
			var ans executeAnswer
			if err := azruntime.UnmarshalAsJSON(resp, &ans); err != nil || ans.Result == nil {
				b.Fatal(err)
			}
			check(b, ans.Status, ans.Result.ExecutionResult)
		}
	})

	b.Run("sdk", func(b *testing.B) {
		session := srv.Client().Session(ident)
		b.ReportAllocs()
		for b.Loop() {
			resp, err := session.Execute(ctx, "1+1", nil)
			if err != nil {
				b.Fatal(err)
			}
			check(b, string(resp.Status), resp.Result)
		}
	})
}

// sizeName spells a byte count as the benchmarks name it (120MiB, 1GiB).
func sizeName(n int64) string {
	if n >= 1<<30 && n%(1<<30) == 0 {
		return strconv.FormatInt(n>>30, 10) + "GiB"
	}
	return strconv.FormatInt(n>>20, 10) + "MiB"
}

// transferSizes are 120 MiB (under the service's 128 MiB limit) and, with
// AZSESSIONS_BENCH_LARGE=1, 1 GiB.
func transferSizes() []int64 {
	sizes := []int64{120 << 20}
	if benchLarge() {
		sizes = append(sizes, 1<<30)
	}
	return sizes
}

// BenchmarkUpload streams a generated file to the fake, through the SDK and
// as a raw multipart POST (b.SetBytes: compare MB/s). The SDK refuses files
// over MaxUploadBytes (128 MiB) before any I/O, so at 1 GiB only raw runs.
func BenchmarkUpload(b *testing.B) {
	srv := benchServer(b, azsessionstest.Options{Options: emulator.Options{MaxUploadBytes: 2 << 30}})
	ctx := context.Background()
	const ident = "bench-upload"
	session := srv.Client().Session(ident)
	for _, size := range transferSizes() {
		b.Run(sizeName(size)+"/raw", func(b *testing.B) {
			u := srv.Endpoint() + "/files?api-version=" + azsessions.DefaultAPIVersion + "&identifier=" + ident
			b.SetBytes(size)
			for b.Loop() {
				if err := testpayload.RawUpload(ctx, srv.HTTPClient(), u, "up.bin", size); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(sizeName(size)+"/sdk", func(b *testing.B) {
			if size > azsessions.MaxUploadBytes {
				b.Skipf("the SDK refuses uploads over %d bytes (the service's limit) before any I/O", azsessions.MaxUploadBytes)
			}
			b.SetBytes(size)
			for b.Loop() {
				if _, err := session.UploadFile(ctx, "up.bin", testpayload.NewReader(size), nil); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkDownload streams a file from the fake, through the SDK and as a
// raw GET, both copied to io.Discard (b.SetBytes: compare MB/s). The file is
// made by the scripted executor in the session's data directory.
func BenchmarkDownload(b *testing.B) {
	srv := benchServer(b, azsessionstest.Options{})
	ctx := context.Background()
	const ident = "bench-download"
	session := srv.Client().Session(ident)
	for _, size := range transferSizes() {
		name := "down-" + sizeName(size) + ".bin"
		if _, err := session.Execute(ctx, "mkfile "+name+" "+strconv.FormatInt(size, 10), nil); err != nil {
			b.Fatal(err)
		}
		b.Run(sizeName(size)+"/raw", func(b *testing.B) {
			u := srv.Endpoint() + "/files/" + name + "/content?api-version=" + azsessions.DefaultAPIVersion + "&identifier=" + ident
			b.SetBytes(size)
			for b.Loop() {
				resp, err := srv.HTTPClient().Get(u)
				if err != nil {
					b.Fatal(err)
				}
				n, err := io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if err != nil || n != size {
					b.Fatal(n, err)
				}
			}
		})
		b.Run(sizeName(size)+"/sdk", func(b *testing.B) {
			b.SetBytes(size)
			for b.Loop() {
				resp, err := session.DownloadFile(ctx, name, nil)
				if err != nil {
					b.Fatal(err)
				}
				n, err := io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if err != nil || n != size {
					b.Fatal(n, err)
				}
			}
		})
	}
}

// BenchmarkConcurrentSessions runs N sessions at once, 10 executions each,
// through one client (N = 1,000 with AZSESSIONS_BENCH_LARGE=1, else 100). It
// reports errors, the p50 and p99 latency of one Execute, and the goroutines
// left over once the sessions are deleted and idle connections closed.
func BenchmarkConcurrentSessions(b *testing.B) {
	sessions := 100
	if benchLarge() {
		sessions = 1000
	}
	const perSession = 10
	b.Run(fmt.Sprintf("sessions=%d/execs=%d", sessions, perSession), func(b *testing.B) {
		srv := benchServer(b, azsessionstest.Options{Options: emulator.Options{MaxSessions: sessions + 10}})
		client := srv.Client()
		ctx := context.Background()
		runtime.GC()
		baseline := runtime.NumGoroutine()
		var (
			mu      sync.Mutex
			lat     = make([]time.Duration, 0, sessions*perSession)
			errs    int
			firstEr error
		)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			var wg sync.WaitGroup
			for s := range sessions {
				wg.Add(1)
				go func() {
					defer wg.Done()
					session := client.Session(fmt.Sprintf("bench-%d-%d", i, s))
					local := make([]time.Duration, 0, perSession)
					bad := 0
					var first error
					for range perSession {
						t0 := time.Now()
						resp, err := session.Execute(ctx, "1+1", nil)
						local = append(local, time.Since(t0))
						if err == nil && resp.Status != azsessions.ExecutionStatusSucceeded {
							err = resp.Err()
						}
						if err != nil {
							bad++
							if first == nil {
								first = err
							}
						}
					}
					mu.Lock()
					lat = append(lat, local...)
					errs += bad
					if firstEr == nil {
						firstEr = first
					}
					mu.Unlock()
				}()
			}
			wg.Wait()
		}
		b.StopTimer()
		// end the sessions and let the connections go idle, then close them
		for s := range sessions {
			for i := 0; i < b.N; i++ {
				_, _ = client.Session(fmt.Sprintf("bench-%d-%d", i, s)).Delete(ctx, nil)
			}
		}
		srv.HTTPClient().CloseIdleConnections()
		left := 0
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			runtime.GC()
			left = runtime.NumGoroutine() - baseline
			if left <= 0 || time.Now().After(deadline) {
				break
			}
		}
		slices.Sort(lat)
		pct := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))].Microseconds()) / 1000 }
		b.ReportMetric(float64(errs), "errors")
		b.ReportMetric(pct(0.50), "p50-ms")
		b.ReportMetric(pct(0.99), "p99-ms")
		b.ReportMetric(float64(left), "goroutines-left")
		b.ReportMetric(float64(sessions*perSession*b.N)/b.Elapsed().Seconds(), "execs/s")
		if errs > 0 {
			b.Errorf("%d of %d executions failed; first: %v", errs, len(lat), firstEr)
		}
	})
}

// BenchmarkListFiles lists a session holding 10,000 files (made directly in
// its data directory by the scripted executor) with NewListFilesPager, and
// raw: one GET files decoded with encoding/json. -benchmem gives the client's
// memory per listing.
func BenchmarkListFiles(b *testing.B) {
	const files = 10000
	srv := benchServer(b, azsessionstest.Options{})
	ctx := context.Background()
	const ident = "bench-list"
	session := srv.Client().Session(ident)
	if _, err := session.Execute(ctx, "mkfiles "+strconv.Itoa(files), nil); err != nil {
		b.Fatal(err)
	}
	b.Run("files=10000/raw", func(b *testing.B) {
		u := srv.Endpoint() + "/files?api-version=" + azsessions.DefaultAPIVersion + "&identifier=" + url.QueryEscape(ident)
		b.ReportAllocs()
		for b.Loop() {
			resp, err := srv.HTTPClient().Get(u)
			if err != nil {
				b.Fatal(err)
			}
			var list struct {
				Value []struct {
					Name           string    `json:"name"`
					Type           string    `json:"type"`
					SizeInBytes    int64     `json:"sizeInBytes"`
					LastModifiedAt time.Time `json:"lastModifiedAt"`
					ContentType    string    `json:"contentType"`
				} `json:"value"`
			}
			err = json.NewDecoder(resp.Body).Decode(&list)
			resp.Body.Close()
			if err != nil || len(list.Value) != files {
				b.Fatal(len(list.Value), err)
			}
		}
	})
	b.Run("files=10000/sdk", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			n := 0
			pager := session.NewListFilesPager(nil)
			for pager.More() {
				page, err := pager.NextPage(ctx)
				if err != nil {
					b.Fatal(err)
				}
				n += len(page.Files)
			}
			if n != files {
				b.Fatal(n)
			}
		}
	})
}

// cannedTransport answers every request from memory with a fixed execution,
// after draining the request body: the client's own cost, without a server.
// As the service does, the execution's id is the request's operation-id
// (the body holds the all-zero id as a placeholder for it).
type cannedTransport struct{ body []byte }

var cannedID = []byte("00000000-0000-0000-0000-000000000000")

func (t cannedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		_, _ = io.Copy(io.Discard, req.Body)
		req.Body.Close()
	}
	body := t.body
	if id := req.Header.Get("operation-id"); len(id) == len(cannedID) {
		body = bytes.Replace(body, cannedID, []byte(id), 1)
	}
	return &http.Response{
		StatusCode:    http.StatusOK,
		Status:        "200 OK",
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        http.Header{"Content-Type": {"application/json; charset=utf-8"}},
		Body:          io.NopCloser(bytes.NewReader(body)),
		ContentLength: int64(len(body)),
		Request:       req,
	}, nil
}

func (t cannedTransport) Do(req *http.Request) (*http.Response, error) { return t.RoundTrip(req) }

// BenchmarkExecuteClientOnly is BenchmarkExecuteRoundTrip without a server:
// the transport answers from memory, so the numbers are the client's CPU
// and allocations per call alone (raw, bare azcore pipeline, SDK).
func BenchmarkExecuteClientOnly(b *testing.B) {
	const endpoint = "http://127.0.0.1:1/subscriptions/s/resourceGroups/rg/sessionPools/pool"
	const ident = "bench-client"
	answer := []byte(`{"id":"00000000-0000-0000-0000-000000000000","identifier":"bench-client","executionType":"Synchronous","status":"Succeeded","result":{"stdout":"","stderr":"","executionResult":2,"executionTimeInMilliseconds":1}}`)
	tr := cannedTransport{body: answer}
	execURL := endpoint + "/executions?api-version=" + azsessions.DefaultAPIVersion + "&identifier=" + ident
	body := executeBody{CodeInputType: "Inline", ExecutionType: "Synchronous", Code: "1+1", TimeoutInSeconds: 220}
	ctx := context.Background()
	b.Run("raw", func(b *testing.B) {
		hc := &http.Client{Transport: tr}
		b.ReportAllocs()
		for b.Loop() {
			buf, _ := json.Marshal(body)
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, execURL, bytes.NewReader(buf))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json")
			req.Header.Set("operation-id", uuid.New())
			resp, err := hc.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			var ans executeAnswer
			err = json.NewDecoder(resp.Body).Decode(&ans)
			resp.Body.Close()
			if err != nil || ans.Status != "Succeeded" {
				b.Fatal(err)
			}
		}
	})
	b.Run("azcore", func(b *testing.B) {
		client, err := azcore.NewClient("bench", "v0.0.1", azruntime.PipelineOptions{}, &policy.ClientOptions{Transport: tr})
		if err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for b.Loop() {
			req, _ := azruntime.NewRequest(ctx, http.MethodPost, execURL)
			req.Raw().Header.Set("Accept", "application/json")
			req.Raw().Header.Set("operation-id", uuid.New())
			if err := azruntime.MarshalAsJSON(req, body); err != nil {
				b.Fatal(err)
			}
			resp, err := client.Pipeline().Do(req)
			if err != nil || !azruntime.HasStatusCode(resp, http.StatusOK) {
				b.Fatal(err)
			}
			var ans executeAnswer
			if err := azruntime.UnmarshalAsJSON(resp, &ans); err != nil || ans.Status != "Succeeded" {
				b.Fatal(err)
			}
		}
	})
	// sdk sets the canned transport itself as ClientOptions.Transport (a
	// Doer that is not an *http.Client: the client watches its connections
	// for redirects with an httptrace hook); sdk-http-client wraps it in an
	// *http.Client, as the default transport is, whose redirects the
	// client refuses through CheckRedirect at no cost per call.
	for _, sub := range []struct {
		name      string
		transport policy.Transporter
	}{{"sdk", tr}, {"sdk-http-client", &http.Client{Transport: tr}}} {
		b.Run(sub.name, func(b *testing.B) {
			opts := &azsessions.ClientOptions{}
			opts.Transport = sub.transport
			c, err := azsessions.NewClientWithNoCredential(endpoint, opts)
			if err != nil {
				b.Fatal(err)
			}
			session := c.Session(ident)
			b.ReportAllocs()
			for b.Loop() {
				resp, err := session.Execute(ctx, "1+1", nil)
				if err != nil || resp.Status != azsessions.ExecutionStatusSucceeded {
					b.Fatal(err)
				}
			}
		})
	}
}
