package sshtest

import (
	"errors"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
)

// Proxy is a TCP proxy on 127.0.0.1 between a client and a server, with
// faults a test can switch on: Reset closes every current connection
// abruptly (RST), Silence stops forwarding in both directions while keeping
// the sockets open (a network partition), Blackhole makes new connections
// be accepted and never answered, and Resume ends silence and black-holing.
type Proxy struct {
	Addr string // "127.0.0.1"
	Port int

	target string
	ln     net.Listener

	mu        sync.Mutex
	cond      *sync.Cond
	silent    bool
	blackhole bool
	closed    bool
	conns     map[*proxyConn]struct{}

	accepted atomic.Int64
	up       atomic.Int64 // bytes client → server
	down     atomic.Int64 // bytes server → client
}

type proxyConn struct {
	client net.Conn
	server net.Conn // nil while black-holed
}

// StartProxy forwards connections on a new 127.0.0.1 port to target
// ("host:port") until the test ends.
func StartProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("sshtest: proxy listen: %v", err)
	}
	p := &Proxy{
		Addr:   "127.0.0.1",
		Port:   ln.Addr().(*net.TCPAddr).Port,
		target: target,
		ln:     ln,
		conns:  map[*proxyConn]struct{}{},
	}
	p.cond = sync.NewCond(&p.mu)
	go p.accept()
	t.Cleanup(p.Close)
	return p
}

// HostPort is "127.0.0.1:PORT".
func (p *Proxy) HostPort() string { return net.JoinHostPort(p.Addr, strconv.Itoa(p.Port)) }

// Accepted counts the connections accepted so far.
func (p *Proxy) Accepted() int64 { return p.accepted.Load() }

// BytesUp counts the bytes forwarded from clients to the server.
func (p *Proxy) BytesUp() int64 { return p.up.Load() }

// BytesDown counts the bytes forwarded from the server to clients.
func (p *Proxy) BytesDown() int64 { return p.down.Load() }

// Reset closes every current connection on both sides with a TCP RST.
// New connections are forwarded as before.
func (p *Proxy) Reset() {
	p.mu.Lock()
	conns := p.conns
	p.conns = map[*proxyConn]struct{}{}
	p.cond.Broadcast()
	p.mu.Unlock()
	for c := range conns {
		abort(c.client)
		if c.server != nil {
			abort(c.server)
		}
	}
}

// Silence stops forwarding in both directions; the sockets stay open and
// the bytes already read are held until Resume.
func (p *Proxy) Silence() {
	p.mu.Lock()
	p.silent = true
	p.mu.Unlock()
}

// Blackhole makes new connections be accepted and never answered (nor
// forwarded) until Resume.
func (p *Proxy) Blackhole() {
	p.mu.Lock()
	p.blackhole = true
	p.mu.Unlock()
}

// Resume ends Silence and Blackhole. Held connections of the black hole
// stay unanswered; silenced ones carry on.
func (p *Proxy) Resume() {
	p.mu.Lock()
	p.silent, p.blackhole = false, false
	p.cond.Broadcast()
	p.mu.Unlock()
}

// Close stops listening and closes every connection.
func (p *Proxy) Close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	p.cond.Broadcast()
	p.mu.Unlock()
	_ = p.ln.Close()
	p.Reset()
}

func (p *Proxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.accepted.Add(1)
		pc := &proxyConn{client: c}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			c.Close()
			return
		}
		p.conns[pc] = struct{}{}
		hole := p.blackhole
		p.mu.Unlock()
		if hole {
			continue // accepted, never answered
		}
		go p.forward(pc)
	}
}

func (p *Proxy) forward(pc *proxyConn) {
	s, err := net.Dial("tcp", p.target)
	if err != nil {
		abort(pc.client)
		p.drop(pc)
		return
	}
	p.mu.Lock()
	if _, ok := p.conns[pc]; !ok { // reset while dialling
		p.mu.Unlock()
		abort(s)
		return
	}
	pc.server = s
	p.mu.Unlock()
	done := make(chan struct{}, 2)
	go func() { p.pipe(pc, s, pc.client, &p.up); done <- struct{}{} }()
	go func() { p.pipe(pc, pc.client, s, &p.down); done <- struct{}{} }()
	<-done
	// One side ended: end the other the same way a real peer would see it.
	pc.client.Close()
	s.Close()
	<-done
	p.drop(pc)
}

// pipe copies src to dst, holding data while the proxy is silent.
func (p *Proxy) pipe(pc *proxyConn, dst, src net.Conn, count *atomic.Int64) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		// Hold data and end-of-stream alike while silent.
		if !p.waitAudible(pc) {
			return
		}
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
			count.Add(int64(n))
		}
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// Half-close like TCP does, so EOF reaches the other side.
			if tc, ok := dst.(*net.TCPConn); ok {
				_ = tc.CloseWrite()
			}
			return
		}
	}
}

// waitAudible blocks while the proxy is silent; false once the proxy is
// closed or the connection was reset.
func (p *Proxy) waitAudible(pc *proxyConn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for {
		_, live := p.conns[pc]
		if p.closed || !live {
			return false
		}
		if !p.silent {
			return true
		}
		p.cond.Wait()
	}
}

func (p *Proxy) drop(pc *proxyConn) {
	p.mu.Lock()
	delete(p.conns, pc)
	p.mu.Unlock()
}

// abort closes a TCP connection with RST instead of FIN.
func abort(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = c.Close()
}
