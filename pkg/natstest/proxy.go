package natstest

import (
	"net"
	"strings"
	"sync"
	"testing"
)

// Proxy is a TCP proxy between clients and a server that Freeze stops in
// place, as a partition cuts a node off: the connections stay open but
// nothing passes either way, and no reset tells either side (a client
// finds out by its pings only). A connection made while frozen gets no
// byte either (no INFO from the server).
type Proxy struct {
	ln     net.Listener
	target string
	frozen chan struct{}
	freeze sync.Once
	done   chan struct{}
	wg     sync.WaitGroup
	mu     sync.Mutex
	conns  []net.Conn
}

// StartProxy listens on a random loopback port and forwards each
// connection to url's host and port (a nats:// URL or host:port). It is
// closed by t.Cleanup.
func StartProxy(t testing.TB, url string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("natstest: proxy: %v", err)
	}
	p := &Proxy{ln: ln, target: strings.TrimPrefix(url, "nats://"), frozen: make(chan struct{}), done: make(chan struct{})}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.Close)
	return p
}

// URL is the proxy's client URL.
func (p *Proxy) URL() string { return "nats://" + p.ln.Addr().String() }

// Freeze stops every byte from passing, on the proxy's connections and on
// those it accepts later, until Close.
func (p *Proxy) Freeze() { p.freeze.Do(func() { close(p.frozen) }) }

// Close closes the listener and every connection, and waits for the
// proxy's goroutines.
func (p *Proxy) Close() {
	select {
	case <-p.done:
		return
	default:
	}
	close(p.done)
	_ = p.ln.Close()
	p.mu.Lock()
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// track records c for Close; it reports false (and closes c) once the
// proxy is closed.
func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.done:
		_ = c.Close()
		return false
	default:
	}
	p.conns = append(p.conns, c)
	return true
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		if !p.track(c) {
			return
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = c.Close()
			continue
		}
		if !p.track(s) {
			return
		}
		p.wg.Add(2)
		go p.pipe(s, c)
		go p.pipe(c, s)
	}
}

// pipe copies from src to dst until either ends; once frozen it drops
// what it reads and holds both open until Close.
func (p *Proxy) pipe(dst, src net.Conn) {
	defer p.wg.Done()
	buf := make([]byte, 32<<10)
	for {
		select {
		case <-p.frozen:
			<-p.done
			return
		default:
		}
		n, err := src.Read(buf)
		select {
		case <-p.frozen:
			<-p.done
			return
		default:
		}
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				err = werr
			}
		}
		if err != nil { // one side closed or reset: the other goes too
			_ = dst.Close()
			_ = src.Close()
			return
		}
	}
}
