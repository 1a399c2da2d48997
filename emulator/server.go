package emulator

import (
	"context"
	"errors"
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

// Start makes a Handler with opts and serves it on addr ("127.0.0.1:0" picks
// a free loopback port). On error, opts.Executor is closed. The emulator is a
// local stand-in: serve it on loopback only.
func Start(addr string, opts Options) (*Server, error) {
	h, err := NewHandler(opts)
	if err != nil {
		if opts.Executor != nil {
			_ = opts.Executor.Close()
		}
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		_ = h.Close()
		return nil, err
	}
	s := &Server{
		Handler:  h,
		Endpoint: "http://" + ln.Addr().String() + h.PoolPath(),
		srv:      &http.Server{Handler: h, ReadHeaderTimeout: 30 * time.Second, IdleTimeout: 2 * time.Minute},
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
