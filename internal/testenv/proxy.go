package testenv

import (
	"net"
	"net/url"
	"sync"
	"testing"
	"time"
)

// Proxy is a TCP proxy on 127.0.0.1 in front of a real service. Cut makes
// the service unreachable (open connections are closed, new ones refused at
// once), Restore brings it back: a broker outage for brokers a test cannot
// stop itself, and the network fault of the fault harness.
type Proxy struct {
	t      testing.TB
	target string
	ln     net.Listener
	mu     sync.Mutex
	cut    bool
	hole   bool
	conns  map[net.Conn]struct{}
	lat    time.Duration
}

// SetDelay adds d of latency before each forwarded chunk (0: none).
func (p *Proxy) SetDelay(d time.Duration) {
	p.mu.Lock()
	p.lat = d
	p.mu.Unlock()
}

func (p *Proxy) delay() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.lat
}

// NewProxy listens on a free port and forwards to target ("host:port").
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{t: t, target: target, ln: ln, conns: map[net.Conn]struct{}{}}
	go p.accept()
	t.Cleanup(func() { _ = ln.Close(); p.Cut() })
	return p
}

// ProxyURL puts a Proxy in front of the service of rawURL and returns
// rawURL with its host replaced by the proxy's.
func ProxyURL(t testing.TB, rawURL string) (string, *Proxy) {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	p := NewProxy(t, u.Host)
	u.Host = p.Addr()
	return u.String(), p
}

// Addr is the proxy's "127.0.0.1:port".
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Port is the proxy's port.
func (p *Proxy) Port() int { return p.ln.Addr().(*net.TCPAddr).Port }

// Cut closes every connection and refuses new ones until Restore.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	for c := range p.conns {
		_ = c.Close()
	}
	clear(p.conns)
}

// Blackhole makes every connection half-open: nothing is forwarded in
// either direction and nothing is closed, so peers see silence, not an
// error, until their own timeouts fire. Restore ends it (connections that
// were silenced are closed then, as a middlebox that lost state would).
func (p *Proxy) Blackhole() {
	p.mu.Lock()
	p.hole = true
	p.mu.Unlock()
}

func (p *Proxy) holed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.hole
}

// Restore accepts and forwards connections again.
func (p *Proxy) Restore() {
	p.mu.Lock()
	wasHole := p.hole
	p.cut, p.hole = false, false
	if wasHole {
		for c := range p.conns {
			_ = c.Close()
		}
		clear(p.conns)
	}
	p.mu.Unlock()
}

func (p *Proxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		cut := p.cut
		p.mu.Unlock()
		if cut {
			_ = c.Close()
			continue
		}
		go p.serve(c)
	}
}

// SetTarget makes new connections go to target ("host:port"); open ones
// stay where they are (Cut them to move everyone): a service replaced by
// another, such as a server downgraded in place.
func (p *Proxy) SetTarget(target string) {
	p.mu.Lock()
	p.target = target
	p.mu.Unlock()
}

func (p *Proxy) serve(c net.Conn) {
	p.mu.Lock()
	target := p.target
	p.mu.Unlock()
	up, err := net.DialTimeout("tcp", target, 5*time.Second)
	if err != nil {
		_ = c.Close()
		return
	}
	p.mu.Lock()
	if p.cut {
		p.mu.Unlock()
		_ = c.Close()
		_ = up.Close()
		return
	}
	p.conns[c], p.conns[up] = struct{}{}, struct{}{}
	p.mu.Unlock()
	var wg sync.WaitGroup
	pipe := func(dst, src net.Conn) {
		defer wg.Done()
		buf := make([]byte, 32<<10)
		for {
			n, err := src.Read(buf)
			if n > 0 && p.holed() {
				continue // swallowed: the peer hears nothing
			}
			if n > 0 {
				if d := p.delay(); d > 0 {
					time.Sleep(d)
				}
				if _, werr := dst.Write(buf[:n]); werr != nil {
					break
				}
			}
			if err != nil {
				break
			}
		}
		_ = dst.Close()
		_ = src.Close()
	}
	wg.Add(2)
	go pipe(up, c)
	go pipe(c, up)
	wg.Wait()
	p.mu.Lock()
	delete(p.conns, c)
	delete(p.conns, up)
	p.mu.Unlock()
}
