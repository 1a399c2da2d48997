package azsessions

import (
	"context"
	"encoding/binary"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/stretchr/testify/require"
)

// endStreamGate is a client connection (HTTP/2 without TLS, so that its
// frames can be read) whose write of a DATA frame with END_STREAM, the last
// frame of a request, blocks until open is closed: a flush held back by TCP
// back-pressure (a slow uplink, a large cell). The bytes reach the server
// once it is open, whatever became of the request's context meanwhile.
type endStreamGate struct {
	net.Conn
	blocked   chan struct{} // closed when a write of a last frame blocks
	open      chan struct{}
	once      sync.Once
	mu        sync.Mutex
	preface   int    // bytes of the client preface still to skip
	pending   []byte // a frame header split across writes
	remaining int    // payload bytes of the current frame still to pass
}

func (g *endStreamGate) Write(p []byte) (int, error) {
	g.mu.Lock()
	last := false
	rest := p
	if g.preface > 0 {
		n := min(g.preface, len(rest))
		g.preface -= n
		rest = rest[n:]
	}
	for len(rest) > 0 {
		if g.remaining > 0 {
			n := min(g.remaining, len(rest))
			g.remaining -= n
			rest = rest[n:]
			continue
		}
		need := 9 - len(g.pending)
		n := min(need, len(rest))
		g.pending = append(g.pending, rest[:n]...)
		rest = rest[n:]
		if len(g.pending) == 9 {
			h := g.pending
			g.remaining = int(h[0])<<16 | int(h[1])<<8 | int(h[2])
			if h[3] == 0 && h[4]&1 != 0 && binary.BigEndian.Uint32(h[5:])&0x7fffffff != 0 {
				last = true
			}
			g.pending = g.pending[:0]
		}
	}
	g.mu.Unlock()
	if last {
		g.once.Do(func() { close(g.blocked) })
		<-g.open
	}
	return g.Conn.Write(p)
}

// TestExecuteH2LastFrameFlushedAfterTry: over HTTP/2 the transport writes
// a request from its own goroutine, and RoundTrip returns as soon as the
// try's context ends, before that goroutine reports the write
// (httptrace WroteRequest). A write of the last DATA frame that is blocked
// then (back-pressure) still completes afterwards: the service gets the
// whole request and runs the code. The try's failure must count as maybe
// sent: when the caller's context ended, ErrExecutionOutcomeUnknown, not
// the plain error that says the code did not run; after a per-try timeout,
// no second POST.
func TestExecuteH2LastFrameFlushedAfterTry(t *testing.T) {
	t.Parallel() // its per-try timeouts wait on real time
	for _, tc := range []struct {
		name       string
		tryTimeout time.Duration
	}{{"caller cancels", 0}, {"per-try timeout", 300 * time.Millisecond}} {
		t.Run(tc.name, func(t *testing.T) {
			srv := &rawH2Server{answer: func(int32) (uint32, []byte) { return 0, succeededFor("x") }}
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			require.NoError(t, err)
			srv.ln = ln
			srv.wg.Add(1)
			go func() {
				defer srv.wg.Done()
				for {
					c, err := ln.Accept()
					if err != nil {
						return
					}
					srv.mu.Lock()
					srv.conns = append(srv.conns, c)
					srv.mu.Unlock()
					srv.wg.Add(1)
					go srv.serve(c)
				}
			}()
			gate := &endStreamGate{blocked: make(chan struct{}), open: make(chan struct{}), preface: 24}
			var openOnce sync.Once
			openGate := func() { openOnce.Do(func() { close(gate.open) }) }
			t.Cleanup(func() {
				openGate()
				ln.Close()
				srv.mu.Lock()
				for _, c := range srv.conns {
					c.Close()
				}
				srv.mu.Unlock()
				srv.wg.Wait()
			})
			tr := &http.Transport{
				DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
					c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
					if err != nil {
						return nil, err
					}
					gate.Conn = c
					return gate, nil
				},
				Protocols: new(http.Protocols),
			}
			tr.Protocols.SetUnencryptedHTTP2(true)
			t.Cleanup(tr.CloseIdleConnections)
			co := &ClientOptions{}
			co.Transport = &http.Client{Transport: tr}
			co.Retry.TryTimeout = tc.tryTimeout
			co.Retry.RetryDelay = time.Millisecond
			// One retry is enough for a second POST to show (it would open
			// the gate: the code would run twice). The lookups after the
			// per-try timeout time out too (the gate holds the connection):
			// the default three retries of each only added 300 ms waits.
			co.Retry.MaxRetries = 1
			// a second try opens the gate: the first try's last frame and
			// then the second try's request reach the server
			tries := 0
			co.PerRetryPolicies = []policy.Policy{policyFunc(func(req *policy.Request) (*http.Response, error) {
				if req.Raw().Method == http.MethodPost {
					if tries++; tries > 1 {
						openGate()
					}
				}
				return req.Next()
			})}
			c, err := NewClientWithNoCredential("http://"+ln.Addr().String()+poolPath, co)
			require.NoError(t, err)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tc.tryTimeout == 0 {
				go func() { <-gate.blocked; cancel() }()
			}
			_, err = c.Session(testIdentifier).Execute(ctx, "launch_missiles()", nil)
			openGate()
			require.Eventually(t, func() bool { return srv.runs.Load() >= 1 }, 10*time.Second, time.Millisecond, "the first request's last frame reaches the server")
			require.Equal(t, int32(1), srv.runs.Load(), "the code reached the server (and ran) %d times", srv.runs.Load())
			require.ErrorIs(t, err, ErrExecutionOutcomeUnknown, "the code ran; the error must not say it did not")
		})
	}
}

type policyFunc func(*policy.Request) (*http.Response, error)

func (f policyFunc) Do(req *policy.Request) (*http.Response, error) { return f(req) }
