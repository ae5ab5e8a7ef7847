package testenv

import (
	"net"
	"net/http"
	"sync"
	"testing"
	"time"
)

// HTTPServer serves a handler on a loopback port of the test's own and can
// be stopped and started again on the same port, as an HTTP endpoint that
// goes down and comes back.
type HTTPServer struct {
	Addr    string // host:port
	handler http.Handler
	mu      sync.Mutex
	srv     *http.Server
}

// StartHTTP serves h on a free port until the test ends.
func StartHTTP(t testing.TB, h http.Handler) *HTTPServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &HTTPServer{Addr: ln.Addr().String(), handler: h}
	s.serve(ln)
	t.Cleanup(s.Stop)
	return s
}

// URL is http://Addr.
func (s *HTTPServer) URL() string { return "http://" + s.Addr }

func (s *HTTPServer) serve(ln net.Listener) {
	srv := &http.Server{Handler: s.handler, ReadHeaderTimeout: 10 * time.Second}
	s.mu.Lock()
	s.srv = srv
	s.mu.Unlock()
	go func() { _ = srv.Serve(ln) }()
}

// Stop closes the listener and every connection: requests fail as against
// a server that went away.
func (s *HTTPServer) Stop() {
	s.mu.Lock()
	srv := s.srv
	s.srv = nil
	s.mu.Unlock()
	if srv != nil {
		_ = srv.Close()
	}
}

// Start serves again on the same port.
func (s *HTTPServer) Start(t testing.TB) {
	t.Helper()
	var err error
	for range 100 { // the port was ours a moment ago
		var ln net.Listener
		if ln, err = net.Listen("tcp", s.Addr); err == nil {
			s.serve(ln)
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Errorf("listen again on %s: %v", s.Addr, err)
}
