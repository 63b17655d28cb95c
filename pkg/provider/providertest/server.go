package providertest

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
)

// Response is one scripted HTTP answer of a Server.
type Response struct {
	// Status is the HTTP status; 0 means 200.
	Status int
	// Header is sent as is (e.g. "Retry-After"). Content-Type defaults to
	// text/event-stream for status 200 and application/json otherwise.
	Header http.Header
	// Body is written as is.
	Body []byte
	// ChunkSize > 0 writes the body in pieces of that many bytes, flushing
	// after each, so the client sees a trickle as from a real server.
	ChunkSize int
	// Stall keeps the response open after the body until the client goes
	// away or the server is closed (a silent provider, for idle timeouts).
	Stall bool
	// Hold, when not nil, pauses the body after its first HoldAt bytes
	// (written and flushed) until Hold is closed, the client goes away or
	// the server is closed: a model pausing mid-response, e.g. between
	// two blocks.
	Hold   <-chan struct{}
	HoldAt int
}

// SSE returns a 200 text/event-stream response with body.
func SSE(body []byte) Response { return Response{Status: http.StatusOK, Body: body} }

// Status returns an error response with a JSON body; retryAfter, if not
// empty, is sent as the Retry-After header (seconds or an HTTP date).
func Status(code int, retryAfter string, body string) Response {
	h := http.Header{}
	if retryAfter != "" {
		h.Set("Retry-After", retryAfter)
	}
	return Response{Status: code, Header: h, Body: []byte(body)}
}

// Request is a request the Server received.
type Request struct {
	Method string
	Path   string // URL path, e.g. "/chat/completions"
	Query  string // raw query
	Header http.Header
	Body   []byte
}

// Server is a replay server: each request gets the next Response of its
// script (the last one repeats), and every request is recorded.
type Server struct {
	srv *httptest.Server

	mu       sync.Mutex
	script   []Response
	next     int
	requests []Request

	done     chan struct{}
	doneOnce sync.Once
}

// NewServer starts a Server playing script; it is closed when the test
// ends. With an empty script every request gets 404.
func NewServer(t testing.TB, script ...Response) *Server {
	t.Helper()
	s := Start(script...)
	t.Cleanup(s.Close)
	return s
}

// Start starts a Server outside a test (e.g. in an Example); call Close.
func Start(script ...Response) *Server {
	s := &Server{script: script, done: make(chan struct{})}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	return s
}

// URL is the server's base URL (http://127.0.0.1:port), to be used as the
// SDK's base URL.
func (s *Server) URL() string { return s.srv.URL }

// Client returns an http.Client for the server.
func (s *Server) Client() *http.Client { return s.srv.Client() }

// Close releases stalled responses and shuts the server down. It is safe to
// call more than once.
func (s *Server) Close() {
	s.doneOnce.Do(func() {
		close(s.done)
		s.srv.CloseClientConnections()
		s.srv.Close()
	})
}

// SetScript replaces the script and starts it from its first response.
func (s *Server) SetScript(script ...Response) {
	s.mu.Lock()
	s.script, s.next = script, 0
	s.mu.Unlock()
}

// Requests returns a copy of the requests received so far, in order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// RequestCount returns how many requests were received.
func (s *Server) RequestCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.requests)
}

// LastRequest returns the last request received (zero Request if none).
func (s *Server) LastRequest() Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.requests) == 0 {
		return Request{}
	}
	return s.requests[len(s.requests)-1]
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	s.requests = append(s.requests, Request{
		Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery,
		Header: r.Header.Clone(), Body: body,
	})
	var resp Response
	ok := len(s.script) > 0
	if ok {
		i := s.next
		if i >= len(s.script) {
			i = len(s.script) - 1
		} else {
			s.next++
		}
		resp = s.script[i]
	}
	s.mu.Unlock()
	if !ok {
		http.NotFound(w, r)
		return
	}
	status := resp.Status
	if status == 0 {
		status = http.StatusOK
	}
	h := w.Header()
	for k, vs := range resp.Header {
		h[k] = append([]string(nil), vs...)
	}
	if h.Get("Content-Type") == "" {
		if status == http.StatusOK {
			h.Set("Content-Type", "text/event-stream")
		} else {
			h.Set("Content-Type", "application/json")
		}
	}
	if status == http.StatusOK {
		h.Set("Cache-Control", "no-cache")
	} else {
		h.Set("Content-Length", strconv.Itoa(len(resp.Body)))
	}
	w.WriteHeader(status)
	fl, _ := w.(http.Flusher)
	out := resp.Body
	if resp.Hold != nil {
		at := min(max(resp.HoldAt, 0), len(out))
		if _, err := w.Write(out[:at]); err != nil {
			return
		}
		if fl != nil {
			fl.Flush()
		}
		select {
		case <-resp.Hold:
		case <-r.Context().Done():
			return
		case <-s.done:
			return
		}
		out = out[at:]
	}
	if resp.ChunkSize > 0 {
		for b := out; len(b) > 0; {
			n := min(resp.ChunkSize, len(b))
			if _, err := w.Write(b[:n]); err != nil {
				return
			}
			if fl != nil {
				fl.Flush()
			}
			b = b[n:]
		}
	} else {
		_, _ = w.Write(out)
	}
	if fl != nil {
		fl.Flush()
	}
	if resp.Stall {
		select {
		case <-r.Context().Done():
		case <-s.done:
		}
	}
}
