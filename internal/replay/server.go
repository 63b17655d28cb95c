package replay

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/llmworker/llmworker/internal/leaf/fixtures"
)

// HeaderFixture names the fixture a request wants. The replay provider's
// http.Client sets it; the server ignores the URL path, so every SDK's URL
// layout (/v1/messages, /chat/completions, /v1beta/models/...) works.
const HeaderFixture = "X-Llmw-Replay-Fixture"

// DefaultPace is the Pace of the commands' --replay-pace: about 80
// tokens a second, the rate of a fast hosted model.
const DefaultPace = 12 * time.Millisecond

// Config configures a Server. The zero value plays at full speed on a
// random loopback port.
type Config struct {
	// Pace is the time the replay providers take per token of every delta
	// they stream (text, thinking, tool input; a token being about four
	// characters, see Tokens), so that a person watching sees the answer
	// stream as a live model writes it (0 = as fast as possible).
	Pace time.Duration
	// Addr to listen on ("" = 127.0.0.1:0).
	Addr string
}

// Server serves recorded provider streams over HTTP.
type Server struct {
	cfg  Config
	ln   net.Listener
	srv  *http.Server
	url  string
	done chan struct{}
	wg   sync.WaitGroup

	closeOnce sync.Once
	requests  atomic.Int64

	mu    sync.Mutex
	cache map[string][]byte
	provs map[string]*provider
}

// NewServer starts a Server; Close it when done.
func NewServer(cfg Config) (*Server, error) {
	addr := cfg.Addr
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	s := &Server{
		cfg: cfg, ln: ln, url: "http://" + ln.Addr().String(), done: make(chan struct{}),
		cache: map[string][]byte{}, provs: map[string]*provider{},
	}
	s.srv = &http.Server{Handler: http.HandlerFunc(s.serve), ReadHeaderTimeout: 10 * time.Second}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		_ = s.srv.Serve(ln)
	}()
	return s, nil
}

// URL is the server's base URL.
func (s *Server) URL() string { return s.url }

// Requests returns how many requests the server answered.
func (s *Server) Requests() int { return int(s.requests.Load()) }

// Close stops the server; streams being served end at once.
func (s *Server) Close() error {
	var err error
	s.closeOnce.Do(func() {
		close(s.done)
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if err = s.srv.Shutdown(ctx); err != nil {
			err = s.srv.Close()
		}
		s.wg.Wait()
		s.mu.Lock()
		for _, p := range s.provs {
			p.closeIdle()
		}
		s.mu.Unlock()
	})
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

func (s *Server) body(name string) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if b, ok := s.cache[name]; ok {
		return b, nil
	}
	b, err := fixtures.SSE(name)
	if err != nil {
		return nil, err
	}
	s.cache[name] = b
	return b, nil
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	s.requests.Add(1)
	name := r.Header.Get(HeaderFixture)
	body, err := s.body(name)
	if name == "" || err != nil {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(`{"error":{"type":"not_found","message":"replay: no recorded stream named ` + jsonSafe(name) + `"}}`))
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	fl, _ := w.(http.Flusher)
	for _, ev := range splitEvents(body) {
		select {
		case <-r.Context().Done():
			return
		case <-s.done:
			return
		default:
		}
		if _, err := w.Write(ev); err != nil {
			return
		}
		if fl != nil {
			fl.Flush()
		}
	}
}

// splitEvents cuts an SSE body after each blank line (LF or CRLF), keeping
// the bytes exactly as recorded.
func splitEvents(b []byte) [][]byte {
	var out [][]byte
	for len(b) > 0 {
		i, n := bytes.Index(b, []byte("\n\n")), 2
		if j := bytes.Index(b, []byte("\r\n\r\n")); j >= 0 && (i < 0 || j < i) {
			i, n = j, 4
		}
		if i < 0 {
			out = append(out, b)
			break
		}
		out = append(out, b[:i+n])
		b = b[i+n:]
	}
	return out
}

func jsonSafe(s string) string {
	var b bytes.Buffer
	for _, r := range s {
		if r == '"' || r == '\\' || r < ' ' {
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}
