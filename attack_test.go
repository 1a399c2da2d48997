package azsessions

// Attacks on the client's promises (the red-team findings against main
// 000e01f, branch redclient): code never runs twice; the token and the
// identifier never leak; a hostile server cannot take the memory or hang
// a call for ever; bad input is refused before any I/O. Each test failed
// before the defense it names.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	goruntime "runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/stretchr/testify/require"
)

// succeededFor is a finished execution answer for operation-id id.
func succeededFor(id string) []byte {
	return []byte(`{"id":"` + id + `","identifier":"x","status":"Succeeded","result":{"stdout":"ran\n","stderr":"","executionResult":"","executionTimeInMilliseconds":1}}`)
}

// rawH2Server speaks just enough HTTP/2 over TLS (ALPN h2) to count
// request bodies that arrived whole (a DATA frame with END_STREAM: the
// server got the complete execution request and "runs" it) and answer each
// stream with answer(n), n counting from 1.
type rawH2Server struct {
	ln      net.Listener
	runs    atomic.Int32
	wg      sync.WaitGroup
	answer  func(n int32) (rstCode uint32, body []byte)
	tlsConf *tls.Config
	mu      sync.Mutex
	conns   []net.Conn
}

func writeFrame(w io.Writer, typ, flags byte, stream uint32, payload []byte) error {
	var h [9]byte
	h[0], h[1], h[2] = byte(len(payload)>>16), byte(len(payload)>>8), byte(len(payload))
	h[3], h[4] = typ, flags
	binary.BigEndian.PutUint32(h[5:], stream&0x7fffffff)
	_, err := w.Write(append(h[:], payload...))
	return err
}

func (s *rawH2Server) serve(c net.Conn) {
	defer s.wg.Done()
	defer c.Close()
	r := bufio.NewReader(c)
	preface := make([]byte, 24)
	if _, err := io.ReadFull(r, preface); err != nil {
		return
	}
	var wmu sync.Mutex
	write := func(typ, flags byte, stream uint32, p []byte) {
		wmu.Lock()
		defer wmu.Unlock()
		_ = writeFrame(c, typ, flags, stream, p)
	}
	write(4, 0, 0, nil) // SETTINGS
	for {
		var h [9]byte
		if _, err := io.ReadFull(r, h[:]); err != nil {
			return
		}
		n := int(h[0])<<16 | int(h[1])<<8 | int(h[2])
		typ, flags := h[3], h[4]
		stream := binary.BigEndian.Uint32(h[5:]) & 0x7fffffff
		payload := make([]byte, n)
		if _, err := io.ReadFull(r, payload); err != nil {
			return
		}
		switch typ {
		case 4: // SETTINGS
			if flags&1 == 0 {
				write(4, 1, 0, nil)
			}
		case 6: // PING
			if flags&1 == 0 {
				write(6, 1, 0, payload)
			}
		case 1: // HEADERS
			if flags&1 != 0 { // END_STREAM: a request without a body (the look-up GET)
				write(1, 4, stream, []byte{0x8d}) // :status 404, END_HEADERS
				write(0, 1, stream, []byte(`{"error":{"code":"ExecutionNotFound","message":"no execution with this id"}}`))
			}
		case 0: // DATA
			if flags&1 != 0 { // END_STREAM: the whole request body is here
				k := s.runs.Add(1)
				rst, body := s.answer(k)
				if rst != 0 {
					var p [4]byte
					binary.BigEndian.PutUint32(p[:], rst)
					write(3, 0, stream, p[:]) // RST_STREAM
					continue
				}
				write(1, 4, stream, []byte{0x88}) // HEADERS :status 200, END_HEADERS
				write(0, 1, stream, body)         // DATA, END_STREAM
			}
		}
	}
}

func startRawH2(t *testing.T, answer func(n int32) (uint32, []byte)) (*rawH2Server, *http.Client, string) {
	// borrow httptest's certificate and a client that trusts it and speaks h2
	ts := httptest.NewUnstartedServer(http.NotFoundHandler())
	ts.EnableHTTP2 = true
	ts.StartTLS()
	client := ts.Client()
	s := &rawH2Server{answer: answer, tlsConf: &tls.Config{Certificates: ts.TLS.Certificates, NextProtos: []string{"h2"}}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	s.ln = tls.NewListener(ln, s.tlsConf)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			c, err := s.ln.Accept()
			if err != nil {
				return
			}
			s.mu.Lock()
			s.conns = append(s.conns, c)
			s.mu.Unlock()
			s.wg.Add(1)
			go s.serve(c)
		}
	}()
	t.Cleanup(func() {
		s.ln.Close()
		s.mu.Lock()
		for _, c := range s.conns {
			c.Close()
		}
		s.mu.Unlock()
		s.wg.Wait()
		client.CloseIdleConnections()
		ts.Close()
	})
	return s, client, "https://" + ln.Addr().String() + poolPath
}

// TestExecuteH2StreamResetNotResent (finding 1): the service (or an HTTP/2
// proxy) gets the whole POST executions, runs the code, then resets the
// stream. net/http's HTTP/2 client replays such a request by itself when
// GetBody is set (azcore sets it for every body); sendTrackerPolicy clears
// it for execution requests, so the code runs once and the outcome is
// unknown (the look-up answers 404).
func TestExecuteH2StreamResetNotResent(t *testing.T) {
	for _, tc := range []struct {
		name   string
		code   uint32
		resets int32
	}{{"PROTOCOL_ERROR", 0x1, 1}, {"PROTOCOL_ERROR twice", 0x1, 2}, {"REFUSED_STREAM after running", 0x7, 1}} {
		t.Run(tc.name, func(t *testing.T) {
			srv, hc, endpoint := startRawH2(t, func(n int32) (uint32, []byte) {
				if n <= tc.resets {
					return tc.code, nil // ran it, then the stream is reset
				}
				return 0, succeededFor("x")
			})
			co := &ClientOptions{}
			co.Transport = hc
			c, err := NewClientWithNoCredential(endpoint, co)
			require.NoError(t, err)
			_, err = c.Session(testIdentifier).Execute(context.Background(), "launch_missiles()", nil)
			require.ErrorIs(t, err, ErrExecutionOutcomeUnknown)
			require.Equal(t, int32(1), srv.runs.Load(), "the code reached the server (and ran) %d times", srv.runs.Load())
		})
	}
}

// TestExecuteOperationIDNotResent (finding 2): a caller-chosen OperationID
// this Client already sent for the session is refused before any I/O,
// whatever the service's record says: after ErrExecutionOutcomeUnknown (a
// gateway 504; the backend records the first POST only later), and while
// another call with the same id is in flight. An id whose POST was refused
// with a 4xx (nothing ran) may be used again.
func TestExecuteOperationIDNotResent(t *testing.T) {
	t.Run("after an unknown outcome", func(t *testing.T) {
		b := newSlowBackend()
		p := setup(t, APIVersion20251002Preview)
		var mu sync.Mutex
		var pending []string
		p.handle("POST /executions", func(w http.ResponseWriter, r *http.Request) {
			b.posts.Add(1)
			mu.Lock()
			pending = append(pending, r.Header.Get("operation-id")) // the backend will run it
			mu.Unlock()
			writeError(w, http.StatusGatewayTimeout, "GatewayTimeout", "the backend did not answer in time")
		})
		p.handle("GET /executions/{id}", b.lookup)
		sess := p.client.Session(testIdentifier)
		opts := &ExecuteOptions{OperationID: "job-42"}
		_, err := sess.Execute(context.Background(), "charge_card()", opts)
		require.ErrorIs(t, err, ErrExecutionOutcomeUnknown)
		before := p.count()
		_, err = sess.Execute(context.Background(), "charge_card()", opts)
		require.ErrorIs(t, err, ErrOperationIDInUse)
		require.Equal(t, before, p.count(), "refused before any I/O")
		_, err = p.client.Session(testIdentifier).BeginExecute(context.Background(), "charge_card()", &BeginExecuteOptions{ExecuteOptions: *opts})
		require.ErrorIs(t, err, ErrOperationIDInUse, "another Session value of the same identifier")
		mu.Lock()
		for _, id := range pending { // the slow backend finishes what it got
			b.record(id)
		}
		mu.Unlock()
		require.Equal(t, 1, b.totalRuns(), "charge_card() ran %d times (POSTs: %d)", b.totalRuns(), b.posts.Load())
		got, err := sess.GetExecution(context.Background(), "job-42", nil)
		require.NoError(t, err, "the execution is followed by its id")
		require.Equal(t, "ran\n", got.Stdout)
	})
	t.Run("concurrent calls", func(t *testing.T) {
		p := setup(t, APIVersion20251002Preview)
		var posts atomic.Int32
		arrived, gate := make(chan struct{}), make(chan struct{})
		var gets atomic.Int32
		p.handle("GET /executions/{id}", func(w http.ResponseWriter, r *http.Request) {
			if gets.Add(1) == 1 {
				close(arrived)
				<-gate // the first pre-check waits until the second call is over
			}
			writeError(w, http.StatusNotFound, "ExecutionNotFound", "no execution with this id")
		})
		p.handle("POST /executions", func(w http.ResponseWriter, r *http.Request) {
			posts.Add(1)
			writeJSON(w, http.StatusOK, succeededFor(r.Header.Get("operation-id")))
		})
		first := make(chan error, 1)
		go func() {
			_, err := p.client.Session(testIdentifier).Execute(context.Background(), "charge_card()", &ExecuteOptions{OperationID: "job-7"})
			first <- err
		}()
		<-arrived // the first call's pre-check is in flight
		var once sync.Once
		release := func() { once.Do(func() { close(gate) }) }
		t.Cleanup(release) // before the server's Close, also when the test fails
		_, err := p.client.Session(testIdentifier).Execute(context.Background(), "charge_card()", &ExecuteOptions{OperationID: "job-7"})
		require.ErrorIs(t, err, ErrOperationIDInUse)
		release()
		require.NoError(t, <-first)
		require.Equal(t, int32(1), posts.Load(), "the same operation-id was POSTed %d times", posts.Load())
		require.Equal(t, 1, p.requestsTo("GET", "/executions/job-7"))
	})
	t.Run("reusable after a refusal", func(t *testing.T) {
		p := setup(t, APIVersion20251002Preview)
		var posts atomic.Int32
		p.handle("GET /executions/{id}", func(w http.ResponseWriter, r *http.Request) {
			writeError(w, http.StatusNotFound, "ExecutionNotFound", "no execution with this id")
		})
		p.handle("POST /executions", func(w http.ResponseWriter, r *http.Request) {
			if posts.Add(1) == 1 {
				writeError(w, http.StatusBadRequest, "InvalidRequest", "refused")
				return
			}
			writeJSON(w, http.StatusOK, succeededFor(r.Header.Get("operation-id")))
		})
		sess := p.client.Session(testIdentifier)
		opts := &ExecuteOptions{OperationID: "job-9"}
		_, err := sess.Execute(context.Background(), "x", opts)
		require.Error(t, err)
		require.NotErrorIs(t, err, ErrExecutionOutcomeUnknown)
		resp, err := sess.Execute(context.Background(), "x", opts)
		require.NoError(t, err)
		require.Equal(t, "ran\n", resp.Stdout)
		require.Equal(t, int32(2), posts.Load())
	})
}

// TestExecuteAmbiguousStatusesLookedUp (findings 3, 4, 7): every answer to
// POST executions that may follow a run is ambiguous: any 5xx (gateways
// answer 520, 524, 599 after forwarding the request), 408, a 2xx other than
// 200/202, a 3xx. The client looks the execution up and, without a record,
// returns ErrExecutionOutcomeUnknown; it never sends again, and the error
// and the log do not repeat the identifier the body echoes, whatever the
// status. A 4xx other than 408 is a plain error: nothing ran.
func TestExecuteAmbiguousStatusesLookedUp(t *testing.T) {
	const id = "secretIdentifierXYZ"
	for _, tc := range []struct {
		status  int
		unknown bool
	}{
		{520, true}, {524, true}, {599, true}, {501, true}, {505, true},
		{http.StatusCreated, true}, {http.StatusNonAuthoritativeInfo, true}, {http.StatusNoContent, true},
		{http.StatusSeeOther, true}, {http.StatusRequestTimeout, true},
		{http.StatusBadRequest, false}, {http.StatusConflict, false}, {http.StatusUnprocessableEntity, false},
	} {
		t.Run(fmt.Sprint(tc.status), func(t *testing.T) {
			logged := captureLog(t)
			p := setup(t, APIVersion20251002Preview, withCredential())
			var ran atomic.Int32
			p.handle("POST /executions", func(w http.ResponseWriter, r *http.Request) {
				ran.Add(1) // the origin got it and runs it; the gateway gives up
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(tc.status)
				if tc.status != http.StatusNoContent {
					_, _ = io.WriteString(w, `{"id":"`+r.Header.Get("operation-id")+`","identifier":"`+r.URL.Query().Get("identifier")+`","status":"Succeeded"}`)
				}
			})
			p.handle("GET /executions/{id}", func(w http.ResponseWriter, r *http.Request) {
				writeError(w, http.StatusNotFound, "ExecutionNotFound", "not recorded yet")
			})
			_, err := p.client.Session(id).Execute(context.Background(), "charge_card()", nil)
			require.Error(t, err)
			require.Equal(t, int32(1), ran.Load())
			if tc.unknown {
				require.ErrorIs(t, err, ErrExecutionOutcomeUnknown, "a %d may follow a run: %v", tc.status, err)
				require.Equal(t, 1, p.lookups(), "looked up once")
			} else {
				require.NotErrorIs(t, err, ErrExecutionOutcomeUnknown)
				var re *azcore.ResponseError
				require.ErrorAs(t, err, &re)
				require.Equal(t, tc.status, re.StatusCode)
			}
			require.NotContains(t, err.Error(), id, "identifier in the error text")
			require.NotContains(t, logged(), id, "identifier in the log")
		})
	}
}

// lookups counts the GET executions/{id} requests seen.
func (p *fakePool) lookups() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, s := range p.seen {
		if strings.HasPrefix(s, "GET /executions/") {
			n++
		}
	}
	return n
}

// attackSecretID is a valid identifier (every api-version's rule allows +
// and ') that JSON encoders such as .NET's System.Text.Json write as \u002B
// and \u0027.
const attackSecretID = "Red+Secret'Id4711"

// TestErrorBodiesRedacted (findings 7, 8, 11): an error body never brings
// the identifier or the bearer token into err.Error() or azcore's log:
// not for a 2xx the caller treats as an error, not JSON-escaped (\u002B,
// \u0027, lower-case hex), URL-escaped or as an HTML character reference,
// not a token the gateway quotes.
func TestErrorBodiesRedacted(t *testing.T) {
	jsonEsc := strings.NewReplacer("+", `\u002B`, "'", `\u0027`)
	jsonEscLower := strings.NewReplacer("+", `\u002b`, "'", `\u0027`)
	htmlEsc := strings.NewReplacer("+", `&#43;`, "'", `&#x27;`)
	for _, tc := range []struct {
		name   string
		route  string
		status int
		body   func(r *http.Request) string
		call   func(s *Session) error
		secret string
	}{
		{"GetSession 201 echo", "GET /session", http.StatusCreated, func(r *http.Request) string {
			return `{"identifier":"` + r.URL.Query().Get("identifier") + `"}`
		}, func(s *Session) error { _, err := s.Get(context.Background(), nil); return err }, attackSecretID},
		{"JSON-escaped identifier", "GET /files/{name}", http.StatusNotFound, func(r *http.Request) string {
			return `{"error":{"code":"FileNotFound","message":"File x.txt not found in session ` + jsonEsc.Replace(r.URL.Query().Get("identifier")) + `"}}`
		}, func(s *Session) error { _, err := s.GetFile(context.Background(), "x.txt", nil); return err }, jsonEsc.Replace(attackSecretID)},
		{"JSON-escaped identifier, lower-case hex", "GET /files/{name}", http.StatusBadRequest, func(r *http.Request) string {
			return `{"error":{"code":"Bad","message":"` + jsonEscLower.Replace(r.URL.Query().Get("identifier")) + `"}}`
		}, func(s *Session) error { _, err := s.GetFile(context.Background(), "x.txt", nil); return err }, jsonEscLower.Replace(attackSecretID)},
		{"HTML character references", "GET /files/{name}", http.StatusBadGateway, func(r *http.Request) string {
			return `<html>session ` + htmlEsc.Replace(r.URL.Query().Get("identifier")) + `</html>`
		}, func(s *Session) error { _, err := s.GetFile(context.Background(), "x.txt", nil); return err }, htmlEsc.Replace(attackSecretID)},
		{"token echoed in a 401", "GET /files/{name}", http.StatusUnauthorized, func(r *http.Request) string {
			return `{"error":{"code":"InvalidAuthenticationToken","message":"the access token '` + strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ") + `' is expired"}}`
		}, func(s *Session) error { _, err := s.GetFile(context.Background(), "x.txt", nil); return err }, fakeToken},
		{"token echoed in a 400", "GET /files/{name}", http.StatusBadRequest, func(r *http.Request) string {
			return `{"error":{"code":"Bad","message":"got Authorization: ` + r.Header.Get("Authorization") + `"}}`
		}, func(s *Session) error { _, err := s.GetFile(context.Background(), "x.txt", nil); return err }, fakeToken},
	} {
		t.Run(tc.name, func(t *testing.T) {
			logged := captureLog(t)
			p := setup(t, APIVersion20251002Preview, withCredential(), withOptions(func(o *ClientOptions) { o.Retry.MaxRetries = -1 }))
			p.handle(tc.route, func(w http.ResponseWriter, r *http.Request) {
				require.Equal(t, attackSecretID, r.URL.Query().Get("identifier"))
				writeJSON(w, tc.status, []byte(tc.body(r)))
			})
			err := tc.call(p.client.Session(attackSecretID))
			require.Error(t, err)
			require.Contains(t, err.Error(), "REDACTED", "the body is kept, redacted")
			for _, s := range []string{tc.secret, attackSecretID, fakeToken} {
				require.NotContains(t, err.Error(), s, "secret in the error text")
				require.NotContains(t, logged(), s, "secret in the log")
			}
		})
	}
}

// TestExecuteOnePOSTWhateverTheAnswer: the execution is POSTed once per call
// whatever the answer (only a 429 proves nothing ran), and every lost or
// unusable answer is ErrExecutionOutcomeUnknown.
func TestExecuteOnePOSTWhateverTheAnswer(t *testing.T) {
	hijackClose := func(w http.ResponseWriter) {
		c, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			c.Close()
		}
	}
	cases := []struct {
		name  string
		posts int32
		post  func(w http.ResponseWriter, r *http.Request)
		look  func(w http.ResponseWriter, r *http.Request)
	}{
		{"502 no body", 1, func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(502) }, nil},
		{"503 html", 1, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(503)
			_, _ = io.WriteString(w, "<html>busy</html>")
		}, nil},
		{"504 envelope", 1, func(w http.ResponseWriter, r *http.Request) { writeError(w, 504, "GatewayTimeout", "slow") }, nil},
		{"reset after body", 1, func(w http.ResponseWriter, r *http.Request) { hijackClose(w) }, nil},
		{"200 empty", 1, func(w http.ResponseWriter, r *http.Request) { writeJSON(w, 200, nil) }, nil},
		{"200 null", 1, func(w http.ResponseWriter, r *http.Request) { writeJSON(w, 200, []byte("null")) }, nil},
		{"200 {}", 1, func(w http.ResponseWriter, r *http.Request) { writeJSON(w, 200, []byte("{}")) }, nil},
		{"200 malformed", 1, func(w http.ResponseWriter, r *http.Request) { writeJSON(w, 200, []byte(`{"status":"Succ`)) }, nil},
		{"200 cut body", 1, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Length", "500")
			w.WriteHeader(200)
			_, _ = io.WriteString(w, `{"status":"Succeeded"`)
			_ = http.NewResponseController(w).Flush()
			hijackClose(w)
		}, nil},
		// over the client's cap (responseLimit, lowered to 1 MiB for this
		// case: TestResponseSizeCapped checks the real MaxResponseSize)
		{"200 over the cap chunked", 1, func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(200)
			_, _ = io.WriteString(w, `{"status":"Succeeded","x":"`)
			chunk := []byte(strings.Repeat("a", 1<<20))
			for i := 0; i < 2; i++ {
				if _, err := w.Write(chunk); err != nil {
					return
				}
			}
		}, nil},
		{"429 garbage Retry-After then 504", 2, func() func(w http.ResponseWriter, r *http.Request) {
			var n atomic.Int32
			return func(w http.ResponseWriter, r *http.Request) {
				if n.Add(1) == 1 {
					w.Header().Set("Retry-After", "soon-ish")
					writeError(w, 429, "TooManyRequests", "slow down")
					return
				}
				writeError(w, 504, "GatewayTimeout", "slow")
			}
		}(), nil},
		{"404 html lookup", 1, func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(502) }, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(404)
			_, _ = io.WriteString(w, "<html>not found</html>")
		}},
		{"lookup resets", 1, func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(502) }, func(w http.ResponseWriter, r *http.Request) { hijackClose(w) }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.name == "200 over the cap chunked" {
				responseLimit = 1 << 20 // read by the client setup makes
				t.Cleanup(func() { responseLimit = MaxResponseSize })
			}
			p := setup(t, APIVersion20251002Preview, withCredential())
			var posts atomic.Int32
			p.handle("POST /executions", func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(io.Discard, r.Body)
				posts.Add(1)
				tc.post(w, r)
			})
			look := tc.look
			if look == nil {
				look = func(w http.ResponseWriter, r *http.Request) { writeError(w, 404, "ExecutionNotFound", "no") }
			}
			p.handle("GET /executions/{id}", look)
			_, err := p.client.Session(testIdentifier).Execute(context.Background(), "print(1)", nil)
			require.ErrorIs(t, err, ErrExecutionOutcomeUnknown)
			if tc.name == "200 over the cap chunked" {
				require.ErrorContains(t, err, "MaxResponseSize", "refused for its size")
			}
			require.Equal(t, tc.posts, posts.Load())
		})
	}
}

// TestExecuteConcurrentSessionExactlyOnce: 24 goroutines share one Session;
// the service loses every third answer after running the code. Each
// operation-id runs once; -race finds nothing.
func TestExecuteConcurrentSessionExactlyOnce(t *testing.T) {
	p := setup(t, APIVersion20251002Preview)
	var mu sync.Mutex
	runs := map[string]int{}
	var n atomic.Int32
	p.handle("POST /executions", func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get("operation-id")
		mu.Lock()
		runs[id]++
		mu.Unlock()
		if n.Add(1)%3 == 0 {
			writeError(w, 504, "GatewayTimeout", "lost")
			return
		}
		writeJSON(w, 200, succeededFor(id))
	})
	p.handle("GET /executions/{id}", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, succeededFor(r.PathValue("id")))
	})
	p.handle("GET /files", func(w http.ResponseWriter, r *http.Request) { writeJSON(w, 200, []byte(`{"value":[]}`)) })
	sess := p.client.Session(testIdentifier)
	var wg sync.WaitGroup
	for i := 0; i < 24; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := sess.Execute(context.Background(), fmt.Sprint("print(", i, ")"), nil)
			require.NoError(t, err)
			for _, err := range sess.Files(context.Background(), nil) {
				require.NoError(t, err)
			}
		}()
	}
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, runs, 24)
	for id, k := range runs {
		require.Equal(t, 1, k, id)
	}
}

// TestExecuteResetOnReusedConnectionNotResent: the POST goes out on a
// kept-alive connection; the server reads the whole body and closes the
// connection without answering. It is not sent again (net/http does not
// replay a POST on HTTP/1, and the tracker saw it written).
func TestExecuteResetOnReusedConnectionNotResent(t *testing.T) {
	p := setup(t, APIVersion20251002Preview, withCredential())
	var posts atomic.Int32
	p.handle("GET /metadata", func(w http.ResponseWriter, r *http.Request) { writeJSON(w, 200, []byte(`{}`)) })
	p.handle("POST /executions", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		posts.Add(1)
		c, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			c.Close()
		}
	})
	p.handle("GET /executions/{id}", func(w http.ResponseWriter, r *http.Request) { writeError(w, 404, "ExecutionNotFound", "no") })
	_, err := p.client.GetMetadata(context.Background(), nil) // leaves an idle connection
	require.NoError(t, err)
	_, err = p.client.Session(testIdentifier).Execute(context.Background(), "print(1)", nil)
	require.ErrorIs(t, err, ErrExecutionOutcomeUnknown)
	require.Equal(t, int32(1), posts.Load())
}

// TestExecuteOperationLocationIgnored: a 202 whose Operation-Location
// points at another host. The poller GETs executions/{the operation-id it
// sent} on the endpoint; the other host gets nothing.
func TestExecuteOperationLocationIgnored(t *testing.T) {
	evil := startEvil(t, true)
	p := setup(t, APIVersion20251002Preview, withCredential())
	var sent string
	p.handle("POST /executions", func(w http.ResponseWriter, r *http.Request) {
		sent = r.Header.Get("operation-id")
		writeJSON(w, http.StatusAccepted, []byte(`{"id":"`+sent+`","identifier":"x","status":"Running"}`),
			"Operation-Location", evil.srv.URL+"/executions/steal", "Retry-After", "0")
	})
	p.handle("GET /executions/{id}", func(w http.ResponseWriter, r *http.Request) {
		require.Equal(t, sent, r.PathValue("id"))
		writeJSON(w, 200, succeededFor(sent))
	})
	resp, err := p.client.Session(testIdentifier).Execute(context.Background(), "print(1)", nil)
	require.NoError(t, err)
	require.Equal(t, "ran\n", resp.Stdout)
	require.Zero(t, evil.requests.Load())
}

// TestBadInputRefusedBeforeIO (finding d): an OperationID "." or ".." (GET
// executions/.. is another resource once a proxy normalises it) and code
// that is not valid UTF-8 (encoding/json would send U+FFFD for each bad
// byte: other code than the caller's) are refused before any I/O.
func TestBadInputRefusedBeforeIO(t *testing.T) {
	for _, tc := range []struct {
		name string
		call func(s *Session) error
	}{
		{"GetExecution .", func(s *Session) error { _, err := s.GetExecution(context.Background(), ".", nil); return err }},
		{"GetExecution ..", func(s *Session) error { _, err := s.GetExecution(context.Background(), "..", nil); return err }},
		{"ResumeExecution ..", func(s *Session) error { _, err := s.ResumeExecution("..", nil); return err }},
		{"Execute OperationID ..", func(s *Session) error {
			_, err := s.Execute(context.Background(), "x", &ExecuteOptions{OperationID: ".."})
			return err
		}},
		{"Execute invalid UTF-8", func(s *Session) error {
			_, err := s.Execute(context.Background(), "data = b'\xff\xfe'\nprint(data)", nil)
			return err
		}},
		{"BeginExecute invalid UTF-8", func(s *Session) error {
			_, err := s.BeginExecute(context.Background(), "print('\xc3')", nil)
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := setup(t, APIVersion20251002Preview, withFallback(func(w http.ResponseWriter, r *http.Request) {
				writeError(w, http.StatusNotFound, "NotFound", "no")
			}))
			require.Error(t, tc.call(p.client.Session(testIdentifier)))
			p.requireNoIO(t)
		})
	}
}

// TestUserinfoRefused (finding 9): a user name or password in the endpoint
// or in a nextLink is refused (net/http writes the URL with the password
// as ***, so azcore's log no longer recognises the URL to redact it and
// would log the identifier).
func TestUserinfoRefused(t *testing.T) {
	const id = "secretIdentifierXYZ"
	t.Run("endpoint", func(t *testing.T) {
		for _, ep := range []string{"http://user:pw@127.0.0.1:1" + poolPath, "https://user@example.com" + poolPath} {
			_, err := NewClientWithNoCredential(ep, nil)
			require.ErrorContains(t, err, "user name or password", ep)
			require.NotContains(t, err.Error(), "pw@")
		}
	})
	t.Run("nextLink", func(t *testing.T) {
		logged := captureLog(t)
		p := setup(t, APIVersion20251002Preview, withCredential(), withOptions(func(o *ClientOptions) { o.Retry.MaxRetries = -1 }))
		p.handle("GET /files", func(w http.ResponseWriter, r *http.Request) {
			next := strings.Replace(p.url("/files?page=2"), "https://", "https://u:pw@", 1)
			writeJSON(w, http.StatusOK, []byte(`{"value":[],"nextLink":"`+next+`"}`))
		})
		pg := p.client.Session(id).NewListFilesPager(nil)
		_, err := pg.NextPage(context.Background())
		require.NoError(t, err)
		_, err = pg.NextPage(context.Background())
		require.ErrorContains(t, err, "user name or password")
		require.Equal(t, 1, p.count(), "the nextLink was not followed")
		require.NotContains(t, err.Error(), id)
		require.NotContains(t, logged(), id)
	})
}

// TestNextLinkLoopStops (finding 15): a nextLink that points back at a page
// already fetched ends the pagers and the iterators with an error instead
// of looping for ever.
func TestNextLinkLoopStops(t *testing.T) {
	for _, tc := range []struct {
		name, route, key string
		walk             func(c *Client) (int, error)
	}{
		{"files", "GET /files", "value", func(c *Client) (int, error) {
			n := 0
			for _, err := range c.Session(testIdentifier).Files(context.Background(), nil) {
				if err != nil || n >= 200 {
					return n, err
				}
				n++
			}
			return n, nil
		}},
		{"sessions", "GET /listSessions", "sessions", func(c *Client) (int, error) {
			n := 0
			for _, err := range c.Sessions(context.Background(), nil) {
				if err != nil || n >= 200 {
					return n, err
				}
				n++
			}
			return n, nil
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := setup(t, APIVersion20251002Preview)
			var pages atomic.Int32
			p.handle(tc.route, func(w http.ResponseWriter, r *http.Request) {
				// page 1 -> page 2 -> page 2 -> ...
				pages.Add(1)
				writeJSON(w, http.StatusOK, []byte(`{"`+tc.key+`":[{"name":"a.txt","type":"file","identifier":"s"}],"nextLink":"`+p.url(strings.TrimPrefix(tc.route, "GET ")+"?page=2")+`"}`))
			})
			n, err := tc.walk(p.client)
			require.ErrorContains(t, err, "already followed")
			require.Equal(t, 2, n, "two pages of one item, then the loop is refused")
			require.Equal(t, int32(2), pages.Load())
		})
	}
}

// TestUnauthorizedAtMostTwoPOSTs (finding 5): a 401 with a claims challenge
// (CAE) on POST executions: azcore's bearer policy sends it again with a
// token for the claims, and retryUnauthorizedPolicy then does not, so one
// Execute POSTs the code at most twice (as documented: a 401 is retried
// once). A 401 without a challenge is also retried once.
func TestUnauthorizedAtMostTwoPOSTs(t *testing.T) {
	for _, tc := range []struct {
		name      string
		challenge string
	}{
		{"claims challenge", `Bearer realm="", authorization_uri="https://login.microsoftonline.com/common/oauth2/authorize", error="insufficient_claims", claims="eyJhY2Nlc3NfdG9rZW4iOnsibmJmIjp7ImVzc2VudGlhbCI6dHJ1ZSwgInZhbHVlIjoiMTcyNjI1ODEyMiJ9fX0="`},
		{"no challenge", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := setup(t, APIVersion20251002Preview, withCredential())
			var posts atomic.Int32
			p.handle("POST /executions", func(w http.ResponseWriter, r *http.Request) {
				posts.Add(1)
				if tc.challenge != "" {
					w.Header().Set("WWW-Authenticate", tc.challenge)
				}
				writeError(w, http.StatusUnauthorized, "InvalidAuthenticationToken", "claims required")
			})
			_, err := p.client.Session(testIdentifier).Execute(context.Background(), "print(1)", nil)
			var ae *AuthError
			require.ErrorAs(t, err, &ae)
			require.NotErrorIs(t, err, ErrExecutionOutcomeUnknown, "a 401 is a refusal: nothing ran")
			require.Equal(t, int32(2), posts.Load(), "one Execute POSTed the code %d times", posts.Load())
		})
	}
}

// TestResumeTokenWithoutIdentifier (finding 13): a resume token does not
// hold the session identifier (resuming uses the Session's own), and a
// resumed poller still reports it.
func TestResumeTokenWithoutIdentifier(t *testing.T) {
	const id = "secretIdentifierXYZ"
	p := setup(t, APIVersion20251002Preview)
	p.handle("POST /executions", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusAccepted, []byte(`{"id":"`+r.Header.Get("operation-id")+`","identifier":"`+r.URL.Query().Get("identifier")+`","status":"Running"}`))
	})
	p.handle("GET /executions/{id}", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, []byte(`{"id":"`+r.PathValue("id")+`","status":"Succeeded","result":{"stdout":"ran\n","stderr":"","executionResult":""}}`))
	})
	sess := p.client.Session(id)
	poller, err := sess.BeginExecute(context.Background(), "print(1)", nil)
	require.NoError(t, err)
	tok, err := poller.ResumeToken()
	require.NoError(t, err)
	require.NotContains(t, tok, id)
	resumed, err := sess.BeginExecute(context.Background(), "", &BeginExecuteOptions{ResumeToken: tok})
	require.NoError(t, err)
	resp, err := resumed.PollUntilDone(context.Background(), &runtime.PollUntilDoneOptions{Frequency: time.Millisecond})
	require.NoError(t, err)
	require.Equal(t, id, resp.Identifier)
	require.Equal(t, "ran\n", resp.Stdout)
}

// TestExecuteBoundedTime (finding 14): no hostile answer keeps Execute
// (with context.Background()) waiting for ever: a Retry-After of a day on a
// running execution is shortened to MaxPollDelay, an execution still
// Running ExecutionGrace after its own timeout is given up with
// ErrExecutionOutcomeUnknown and its operation-id, and a POST that is never
// answered fails its try after the execution's timeout plus
// ExecutionGrace (then the look-up decides). Fake clock (synctest): the
// figures are exact, nothing sleeps.
func TestExecuteBoundedTime(t *testing.T) {
	running := func(r *http.Request, hint ...string) (*http.Response, error) {
		status := http.StatusOK
		if r.Method == http.MethodPost {
			status = http.StatusAccepted
		}
		return jsonResponse(r, status, `{"id":"","identifier":"x","status":"Running"}`, hint...), nil
	}
	for _, tc := range []struct {
		name    string
		answer  func(r *http.Request) (*http.Response, error)
		atMost  time.Duration // fake time Execute may take
		posts   int32
		lookups bool
	}{
		{"Retry-After 86400 while running", func(r *http.Request) (*http.Response, error) {
			return running(r, "Retry-After", "86400")
		}, time.Second + ExecutionGrace + MaxPollDelay, 1, false},
		{"retry-after-ms a year while running", func(r *http.Request) (*http.Response, error) {
			return running(r, "retry-after-ms", "31536000000")
		}, time.Second + ExecutionGrace + MaxPollDelay, 1, false},
		{"Running for ever", func(r *http.Request) (*http.Response, error) {
			return running(r)
		}, time.Second + ExecutionGrace + time.Second, 1, false},
		{"POST never answered", func(r *http.Request) (*http.Response, error) {
			if r.Method == http.MethodPost {
				<-r.Context().Done()
				return nil, r.Context().Err()
			}
			return jsonResponse(r, http.StatusNotFound, `{"error":{"code":"ExecutionNotFound","message":"no"}}`), nil
		}, time.Second + ExecutionGrace, 1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var posts, gets atomic.Int32
				o := &ClientOptions{}
				o.Transport = funcTransport(func(r *http.Request) (*http.Response, error) {
					if r.Method == http.MethodPost {
						posts.Add(1)
					} else {
						gets.Add(1)
					}
					return tc.answer(r)
				})
				c, err := NewClientWithNoCredential("http://localhost"+poolPath, o)
				require.NoError(t, err)
				start := time.Now()
				_, err = c.Session(testIdentifier).Execute(context.Background(), "print(1)", &ExecuteOptions{Timeout: time.Second})
				elapsed := time.Since(start)
				require.ErrorIs(t, err, ErrExecutionOutcomeUnknown)
				var unknown *ExecutionOutcomeUnknownError
				require.ErrorAs(t, err, &unknown)
				require.NotEmpty(t, unknown.OperationID)
				require.LessOrEqual(t, elapsed, tc.atMost, "fake time taken")
				require.Equal(t, tc.posts, posts.Load(), "never sent again")
				if tc.lookups {
					require.Equal(t, int32(1), gets.Load(), "looked up once")
				}
			})
		})
	}
}

// TestHostileBodiesMemoryBounded (finding 16): what a hostile answer within
// MaxResponseSize costs is bounded: an error body just under the cap is
// kept only up to MaxErrorBodySize (the error text stays small and one call
// allocates a small multiple of the wire size, the test server's own copy
// included), and a listing page of hundreds of thousands of empty objects
// is refused before it is decoded (MaxPageEntries) instead of becoming
// hundreds of megabytes of heap. The figures are runtime.MemStats deltas
// with generous bounds, relative to the body's size (no timing). The sizes
// are small (a 4 MiB cap through responseLimit, a 1 MiB page): the bounds
// are ratios, and with the defences removed both cases still fail at these
// sizes (see the commit that shrank them from 31 and 8 MiB).
func TestHostileBodiesMemoryBounded(t *testing.T) {
	t.Run("error body", func(t *testing.T) {
		responseLimit = 4 << 20 // read by the client setup makes
		t.Cleanup(func() { responseLimit = MaxResponseSize })
		body := []byte("[" + strings.Repeat("0,", (int(responseLimit)-16)/2) + "0]")
		p := setup(t, APIVersion20251002Preview)
		p.handle("GET /files/{name}", func(w http.ResponseWriter, r *http.Request) {
			writeJSON(w, http.StatusBadRequest, body)
		})
		var before, after goruntime.MemStats
		goruntime.GC()
		goruntime.ReadMemStats(&before)
		_, err := p.client.Session(testIdentifier).GetFile(context.Background(), "x.txt", nil)
		require.Error(t, err)
		msg := err.Error()
		goruntime.ReadMemStats(&after)
		allocated := after.TotalAlloc - before.TotalAlloc
		require.Less(t, len(msg), 4*MaxErrorBodySize, "the error text is %d bytes", len(msg))
		require.Contains(t, msg, "MaxErrorBodySize")
		require.Less(t, allocated, uint64(2*len(body)), "one failed call allocated %d MiB for a %d MiB body", allocated>>20, len(body)>>20)
	})
	t.Run("listing page of empty objects", func(t *testing.T) {
		body := []byte(`{"value":[` + strings.Repeat("{},", (1<<20)/3) + `{}]}`)
		p := setup(t, APIVersion20251002Preview)
		p.handle("GET /files", func(w http.ResponseWriter, r *http.Request) { writeJSON(w, http.StatusOK, body) })
		sessions := bytes.Replace(body, []byte("value"), []byte("sessions"), 1)
		p.handle("GET /listSessions", func(w http.ResponseWriter, r *http.Request) { writeJSON(w, http.StatusOK, sessions) })
		var before, after goruntime.MemStats
		goruntime.GC()
		goruntime.ReadMemStats(&before)
		_, err := p.client.Session(testIdentifier).NewListFilesPager(nil).NextPage(context.Background())
		require.ErrorContains(t, err, "MaxPageEntries")
		_, err = p.client.NewListSessionsPager(nil).NextPage(context.Background())
		require.ErrorContains(t, err, "MaxPageEntries")
		goruntime.ReadMemStats(&after)
		allocated := after.TotalAlloc - before.TotalAlloc
		// decoded, two 8 MiB pages allocated 2.5 GiB (two 1 MiB pages:
		// 340 MiB); refused, about 6x the wire size each (reading, the
		// server's copy; more under -race)
		require.Less(t, allocated, uint64(16*len(body)), "two refused pages allocated %d MiB for %d MiB each", allocated>>20, len(body)>>20)
	})
	t.Run("a full page is decoded", func(t *testing.T) {
		entries := strings.TrimSuffix(strings.Repeat(`{"name":"a.txt","type":"file"},`, MaxPageEntries), ",")
		p := setup(t, APIVersion20251002Preview)
		p.handle("GET /files", func(w http.ResponseWriter, r *http.Request) {
			writeJSON(w, http.StatusOK, []byte(`{"value":[`+entries+`]}`))
		})
		page, err := p.client.Session(testIdentifier).NewListFilesPager(nil).NextPage(context.Background())
		require.NoError(t, err)
		require.Len(t, page.Files, MaxPageEntries)
	})
}

// wrappingTransporter is a Transporter that is not an *http.Client: a
// logging or metrics wrapper, as users write them.
type wrappingTransporter struct{ c *http.Client }

func (w wrappingTransporter) Do(r *http.Request) (*http.Response, error) { return w.c.Do(r) }

// TestRedirectsNotFollowedThroughWrappedTransport (finding 10): the client
// turns redirects off in an *http.Client; a Transporter wrapping one would
// follow them (to the same host on another port net/http even forwards
// Authorization). The redirected request is stopped before it leaves: a
// GET by the connection watch, an execution POST because its body cannot
// be replayed (GetBody cleared).
func TestRedirectsNotFollowedThroughWrappedTransport(t *testing.T) {
	for _, status := range []int{http.StatusFound, http.StatusTemporaryRedirect, http.StatusPermanentRedirect} {
		t.Run(fmt.Sprint(status), func(t *testing.T) {
			evil := startEvil(t, true)
			p := setup(t, APIVersion20251002Preview, withCredential(), withOptions(func(o *ClientOptions) {
				o.Transport = wrappingTransporter{c: o.Transport.(*http.Client)}
			}))
			redirect := func(w http.ResponseWriter, r *http.Request) {
				http.Redirect(w, r, evil.srv.URL+"/steal?"+r.URL.RawQuery, status)
			}
			p.handle("GET /files", redirect)
			p.handle("POST /executions", redirect)
			p.handle("GET /executions/{id}", redirect)
			sess := p.client.Session(hostileIdentifier)
			_, err := sess.NewListFilesPager(nil).NextPage(context.Background())
			require.ErrorContains(t, err, "redirect")
			require.NotContains(t, err.Error(), hostileIdentifier)
			_, err = sess.Execute(context.Background(), "print(1)", nil)
			require.ErrorIs(t, err, ErrExecutionOutcomeUnknown)
			require.NotContains(t, err.Error(), hostileIdentifier)
			require.Equal(t, 1, p.requestsTo("POST", "/executions"))
			evil.mu.Lock()
			defer evil.mu.Unlock()
			require.Zero(t, evil.requests.Load(), "a redirect reached the other origin with Authorization %q", evil.auth)
		})
	}
}
