package emulator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"
)

// Server is a Handler served over plain HTTP on a listener: the embedded
// emulator of the examples, the MCP server and users' programs. Create it with
// Start and stop it with Close.
type Server struct {
	// Handler is the emulated pool management endpoint.
	Handler *Handler
	// Endpoint is the pool management endpoint URL, such as
	// http://127.0.0.1:41234/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/local/sessionPools/emulator.
	Endpoint string

	srv  *http.Server
	done chan struct{}
}

// ErrNotLoopback is wrapped by the error of CheckListenAddr (and so of Start
// and the azsessions-emulator command) for an address other machines can
// reach while no shared token protects it.
var ErrNotLoopback = errors.New("the emulator runs any code it is sent: serving it beyond loopback needs a shared bearer token (Options.RequireToken with Options.Token; in azsessions-emulator -require-token with AZSESSIONS_EMULATOR_TOKEN set)")

// CheckListenAddr refuses to serve on addr (a bound listener's address)
// when it is not a loopback address and opts does not require one shared
// bearer token (RequireToken with Token): whoever reaches the emulator runs
// code in it, and the emulator cannot validate Microsoft Entra tokens. An
// unspecified address (0.0.0.0, [::]) listens on every interface and counts
// as reachable.
func CheckListenAddr(addr net.Addr, opts Options) error {
	if opts.RequireToken && opts.Token != "" {
		return nil
	}
	host, _, err := net.SplitHostPort(addr.String())
	if err != nil {
		return fmt.Errorf("emulator: listen address %s: %w", addr, err)
	}
	ip := net.ParseIP(host)
	if ip != nil && ip.IsLoopback() {
		return nil
	}
	where := addr.String()
	if ip != nil && ip.IsUnspecified() {
		where += " (every interface)"
	}
	return fmt.Errorf("emulator: refusing to serve on %s: %w", where, ErrNotLoopback)
}

// Start makes a Handler with opts and serves it on addr ("127.0.0.1:0" picks
// a free loopback port). On error, opts.Executor is closed. An address other
// machines can reach is refused unless opts requires a shared token (see
// CheckListenAddr). Request bodies are bounded as by the
// azsessions-emulator command: headers within 30 s, idle keep-alive
// connections closed after 2 min, bodies per Options.BodyReadTimeout and
// Options.MinBodyRate.
func Start(addr string, opts Options) (*Server, error) {
	h, err := NewHandler(opts)
	if err != nil {
		if opts.Executor != nil {
			_ = opts.Executor.Close()
		}
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err == nil {
		if err = CheckListenAddr(ln.Addr(), opts); err != nil {
			_ = ln.Close()
		}
	}
	if err != nil {
		_ = h.Close()
		return nil, err
	}
	s := &Server{
		Handler:  h,
		Endpoint: "http://" + ln.Addr().String() + h.PoolPath(),
		srv:      NewHTTPServer(h, nil),
		done:     make(chan struct{}),
	}
	go func() {
		defer close(s.done)
		_ = s.srv.Serve(ln)
	}()
	return s, nil
}

// Close stops serving (letting requests in flight finish for up to 5 s),
// then closes the Handler: every session's kernel is stopped and its data
// removed, and the executor is closed.
func (s *Server) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := s.srv.Shutdown(ctx)
	if err != nil {
		_ = s.srv.Close()
	}
	<-s.done
	if errors.Is(err, context.DeadlineExceeded) {
		err = nil // requests still running are ended by Handler.Close
	}
	return errors.Join(err, s.Handler.Close())
}

// Timeouts of the emulator's HTTP server (NewHTTPServer).
const (
	// ReadHeaderTimeout bounds how long a client may take to send a
	// request's headers.
	ReadHeaderTimeout = 30 * time.Second
	// IdleTimeout closes keep-alive connections idle for this long.
	IdleTimeout = 2 * time.Minute
)

// NewHTTPServer is the emulator's http.Server for h: headers must arrive
// within ReadHeaderTimeout and idle keep-alive connections close after
// IdleTimeout. There is no ReadTimeout or WriteTimeout, which would cut
// large uploads, downloads and long synchronous executions: request bodies
// are bounded by the Handler instead (Options.BodyReadTimeout and
// Options.MinBodyRate). log, when not nil, receives the server's own errors.
func NewHTTPServer(h http.Handler, log *slog.Logger) *http.Server {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: ReadHeaderTimeout, IdleTimeout: IdleTimeout}
	if log != nil {
		srv.ErrorLog = slog.NewLogLogger(log.Handler(), slog.LevelWarn)
	}
	return srv
}
