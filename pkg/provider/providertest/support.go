package providertest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand"
	"net"
	"net/http"
	"reflect"
	"runtime"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/llm"
)

// LeakOptions are the goleak options for an adapter package's TestMain:
// keep-alive connections of http.Transport outlive single tests (they are
// closed with their servers), so their goroutines are not leaks. extra is
// appended (e.g. goroutines an SDK dependency starts in an init function).
func LeakOptions(extra ...goleak.Option) []goleak.Option {
	return append([]goleak.Option{
		// The idle keep-alive connections of the SDKs' HTTP clients, and
		// only those: a goroutine blocked in a read anywhere else is a
		// leaked connection and fails the test.
		goleak.IgnoreAnyFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreAnyFunction("net/http.(*persistConn).writeLoop"),
	}, extra...)
}

// MustCollect drains s and closes it, failing the test if the stream does
// not end (more than a million events) or ends with an error. A Close
// error is only logged: the stream's contents are what tests assert on.
func MustCollect(t testing.TB, s llm.Stream) []events.Event {
	t.Helper()
	var evs []events.Event
	for s.Next() {
		evs = append(evs, s.Current())
		if len(evs) > 1_000_000 {
			t.Fatal("stream does not end")
		}
	}
	if err := s.Err(); err != nil {
		t.Fatalf("stream error: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Logf("close: %v", err)
	}
	return evs
}

// StrictWellFormed checks evs with llm.CheckWellFormed and then with its
// own statement of the invariants of docs/protocol.md §3, independent of the
// library: a non-empty stream starting with status started and ending with
// one terminal status (failed only after an error event), no status in
// between, every event with a Validate method valid, every block started
// once, given deltas of its kind only, and stopped or aborted once with
// its own type. It returns the first violation.
func StrictWellFormed(evs []events.Event) error {
	if err := llm.CheckWellFormed(evs); err != nil {
		return err
	}
	if len(evs) == 0 {
		return fmt.Errorf("empty stream")
	}
	if st, ok := evs[0].(events.StatusEvent); !ok || st.Status != events.StatusStarted {
		return fmt.Errorf("first event is %#v, want status started", evs[0])
	}
	last, ok := evs[len(evs)-1].(events.StatusEvent)
	if !ok || !last.Status.Terminal() {
		return fmt.Errorf("last event is %#v, want a terminal status", evs[len(evs)-1])
	}
	if last.Status == events.StatusFailed {
		sawErr := false
		for _, e := range evs {
			if _, ok := e.(events.ErrorEvent); ok {
				sawErr = true
			}
		}
		if !sawErr {
			return fmt.Errorf("failed without an error event")
		}
	}
	type blk struct {
		typ  events.BlockType
		done bool
	}
	blocks := map[int]*blk{}
	for i, e := range evs {
		if i > 0 && i < len(evs)-1 {
			if st, ok := e.(events.StatusEvent); ok {
				return fmt.Errorf("event %d: status %q in the middle", i, st.Status)
			}
		}
		if v, ok := e.(interface{ Validate() error }); ok {
			if err := v.Validate(); err != nil {
				return fmt.Errorf("event %d (%T): %v", i, e, err)
			}
		}
		switch e := e.(type) {
		case events.BlockStart:
			if _, dup := blocks[e.Index]; dup {
				return fmt.Errorf("event %d: index %d started twice", i, e.Index)
			}
			blocks[e.Index] = &blk{typ: e.BlockType}
		case events.BlockDelta:
			b := blocks[e.Index]
			if b == nil || b.done {
				return fmt.Errorf("event %d: delta for index %d not open", i, e.Index)
			}
			want := map[events.BlockType]events.DeltaKind{events.BlockText: events.DeltaText, events.BlockToolResult: events.DeltaText,
				events.BlockThinking: events.DeltaThinking, events.BlockToolUse: events.DeltaInputJSON}[b.typ]
			if e.Kind != want {
				return fmt.Errorf("event %d: %v delta in a %s block", i, e.Kind, b.typ)
			}
		case events.BlockStop:
			b := blocks[e.Index]
			if b == nil || b.done || b.typ != e.BlockType {
				return fmt.Errorf("event %d: stop for index %d not open (or wrong type)", i, e.Index)
			}
			b.done = true
		case events.BlockAbort:
			b := blocks[e.Index]
			if b == nil || b.done || b.typ != e.BlockType {
				return fmt.Errorf("event %d: abort for index %d not open (or wrong type)", i, e.Index)
			}
			b.done = true
		}
	}
	for idx, b := range blocks {
		if !b.done {
			return fmt.Errorf("block %d never stopped or aborted", idx)
		}
	}
	return nil
}

// Call is a tool call as a stream shows it.
type Call struct {
	ID, Name string
	Input    any // the decoded input JSON ({} when no input was streamed)
	Server   bool
	Aborted  bool
}

// Summary is what a stream says, in the terms tests compare with what a
// fixture says.
type Summary struct {
	Text, Thinking string
	Signatures     []string // of thinking blocks, in order
	AllSignatures  []string // every non-empty block stop signature, in order
	Calls          []Call
	Results        []events.BlockStart // tool_result starts
	ResultTexts    []string
	Usage          *events.UsageEvent
	// StopReason is the response's: the completed status's, else the last
	// non-null block stop reason (docs/protocol.md §3).
	StopReason events.StopReason
	Errors     []events.ErrorEvent
	Status     events.StreamStatus
	// Model and ResponseID are those of the completed status.
	Model, ResponseID string
}

// Summarize folds a collected stream into a Summary. It fails the test when
// a tool call's streamed input is not JSON.
func Summarize(t testing.TB, evs []events.Event) Summary {
	t.Helper()
	var s Summary
	type open struct {
		st  events.BlockStart
		buf bytes.Buffer
	}
	blocks := map[int]*open{}
	for _, e := range evs {
		switch e := e.(type) {
		case events.BlockStart:
			blocks[e.Index] = &open{st: e}
		case events.BlockDelta:
			b := blocks[e.Index]
			switch b.st.BlockType {
			case events.BlockText:
				s.Text += e.Content
			case events.BlockThinking:
				s.Thinking += e.Content
			default:
				b.buf.WriteString(e.Content)
			}
		case events.BlockStop:
			if e.StopReason != "" {
				s.StopReason = e.StopReason
			}
			if e.Signature != "" {
				s.AllSignatures = append(s.AllSignatures, e.Signature)
			}
			b := blocks[e.Index]
			switch b.st.BlockType {
			case events.BlockThinking:
				s.Signatures = append(s.Signatures, e.Signature)
			case events.BlockToolUse:
				c := Call{ID: b.st.ID, Name: b.st.Name, Server: b.st.Server}
				in := b.buf.Bytes()
				if len(in) == 0 {
					in = []byte("{}")
				}
				if err := json.Unmarshal(in, &c.Input); err != nil {
					t.Fatalf("tool call %s input %q: %v", c.ID, in, err)
				}
				s.Calls = append(s.Calls, c)
			case events.BlockToolResult:
				s.Results = append(s.Results, b.st)
				s.ResultTexts = append(s.ResultTexts, b.buf.String())
			}
		case events.BlockAbort:
			if b := blocks[e.Index]; b.st.BlockType == events.BlockToolUse {
				s.Calls = append(s.Calls, Call{ID: b.st.ID, Name: b.st.Name, Server: b.st.Server, Aborted: true})
			}
		case events.UsageEvent:
			u := e
			s.Usage = &u
		case events.ErrorEvent:
			s.Errors = append(s.Errors, e)
		case events.StatusEvent:
			s.Status = e.Status
			if e.Status == events.StatusCompleted {
				s.Model, s.ResponseID = e.Model, e.ResponseID
				if e.StopReason != "" {
					s.StopReason = e.StopReason
				}
			}
		}
	}
	return s
}

// FixedTransport answers every request with one SSE body, in memory: the
// SDK parses it exactly as from the network, without the network's noise
// (for fuzzing and benchmarks).
type FixedTransport struct{ Body []byte }

// FixedClient returns an http.Client whose every request gets body.
func FixedClient(body []byte) *http.Client {
	return &http.Client{Transport: FixedTransport{Body: body}}
}

// RoundTrip implements http.RoundTripper.
func (f FixedTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		_, _ = io.Copy(io.Discard, r.Body)
		_ = r.Body.Close()
	}
	return &http.Response{
		StatusCode: http.StatusOK, Status: "200 OK", Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header:  http.Header{"Content-Type": []string{"text/event-stream"}},
		Body:    io.NopCloser(bytes.NewReader(f.Body)),
		Request: r, ContentLength: -1,
	}, nil
}

// Int64 returns a pointer to v (usage counts are optional *int64).
func Int64(v int64) *int64 { return &v }

// EqualInt64 reports whether a and b are both nil or point to equal values.
func EqualInt64(a, b *int64) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return *a == *b
}

// FormatInt64 formats an optional count: "nil" or the number.
func FormatInt64(p *int64) string {
	if p == nil {
		return "nil"
	}
	return fmt.Sprint(*p)
}

// UsageJSON formats an optional usage event as its JSON, "<nil>" for nil,
// so two usages compare field by field, absent fields included.
func UsageJSON(u *events.UsageEvent) string {
	if u == nil {
		return "<nil>"
	}
	b, _ := json.Marshal(u)
	return string(b)
}

// MustRun streams req from p to its end and fails the test when Stream or
// the stream fails or the events are not well-formed by llm.CheckWellFormed
// and by WellFormed.
func MustRun(t testing.TB, p llm.Provider, req *llm.Request) []events.Event {
	t.Helper()
	s, err := p.Stream(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	evs, err := Collect(s)
	if err != nil {
		t.Fatalf("stream error: %v", err)
	}
	if err := llm.CheckWellFormed(evs); err != nil {
		t.Fatalf("not well-formed: %v\n%v", err, evs)
	}
	if err := WellFormed(evs); err != nil {
		t.Fatalf("not well-formed (providertest): %v\n%v", err, evs)
	}
	return evs
}

// ClosedAddr returns a loopback host:port nobody listens on (it was bound
// and released), for connection-refused tests.
func ClosedAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// CollectCancelled streams req from p, cancels the context as soon as
// cancelAt returns true for an event, reads the stream to its end and
// closes it. It fails the test when the events are not StrictWellFormed or
// the terminal status is not cancelled, and returns the events.
func CollectCancelled(t testing.TB, p llm.Provider, req *llm.Request, cancelAt func(events.Event) bool) []events.Event {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s, err := p.Stream(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	var evs []events.Event
	for s.Next() {
		evs = append(evs, s.Current())
		if cancelAt(s.Current()) {
			cancel()
		}
	}
	s.Close()
	if err := StrictWellFormed(evs); err != nil {
		t.Fatal(err)
	}
	if st := evs[len(evs)-1].(events.StatusEvent); st.Status != events.StatusCancelled {
		t.Errorf("status %s, want cancelled", st.Status)
	}
	return evs
}

// CheckFuzzInput is the body of a fuzz target on a provider that answers
// with the fuzz input (see FixedClient): Stream may reject the input, but a
// stream it returns must end without an error and be StrictWellFormed. A
// stream that does not end within 10s panics with the input and every
// goroutine's stack, so a hang becomes a reported failure.
func CheckFuzzInput(t *testing.T, p llm.Provider, req *llm.Request, body []byte) {
	t.Helper()
	wd := time.AfterFunc(10*time.Second, func() {
		buf := make([]byte, 1<<20)
		n := runtime.Stack(buf, true)
		panic(fmt.Sprintf("hang on %q\n%s", body, buf[:n]))
	})
	defer wd.Stop()
	s, err := p.Stream(context.Background(), req)
	if err != nil {
		return // rejected before the stream: no stream to check
	}
	evs := MustCollect(t, s)
	if err := StrictWellFormed(evs); err != nil {
		t.Fatalf("not well-formed: %v\n%q", err, body)
	}
}

// FuzzServer runs f's fuzz inputs as the body srv answers p's request
// with: Stream may reject an input, but a stream it returns must be
// well-formed by llm.CheckWellFormed and by WellFormed.
func FuzzServer(f *testing.F, srv *Server, p llm.Provider, req *llm.Request) {
	f.Fuzz(func(t *testing.T, body []byte) {
		srv.SetScript(SSE(body))
		s, err := p.Stream(context.Background(), req)
		if err != nil {
			return // not a stream at all; Stream said so
		}
		evs, _ := Collect(s)
		if err := llm.CheckWellFormed(evs); err != nil {
			t.Fatalf("not well-formed: %v", err)
		}
		if err := WellFormed(evs); err != nil {
			t.Fatalf("not well-formed (providertest): %v", err)
		}
	})
}

// CheckMutatedFixtures is a deterministic complement to a fuzz target: n
// random edits (Mutate with a fixed seed) of the fixtures in directory dir
// are served to the provider that newProvider makes for the replay
// server's base URL; each stream must be well-formed by
// llm.CheckWellFormed, without a panic.
func CheckMutatedFixtures(t *testing.T, dir string, n int, req *llm.Request, newProvider func(baseURL string) (llm.Provider, error)) {
	t.Helper()
	var seeds [][]byte
	for _, f := range Fixtures(t, dir) {
		seeds = append(seeds, MustLoadFixture(t, f))
	}
	srv := NewServer(t)
	p, err := newProvider(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewSource(1))
	for i := 0; i < n; i++ {
		body := Mutate(r, seeds)
		srv.SetScript(SSE(body))
		s, err := p.Stream(context.Background(), req)
		if err != nil {
			continue
		}
		evs, _ := Collect(s)
		if err := llm.CheckWellFormed(evs); err != nil {
			t.Fatalf("input %d: %v\n%q", i, err, body)
		}
	}
}

// BenchmarkStream measures p streaming req to its end, b.N times, with
// body's size as the bytes per operation; a stream of fewer than 3 events
// (no content between start and end) fails the benchmark.
func BenchmarkStream(b *testing.B, p llm.Provider, req *llm.Request, body []byte) {
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		s, err := p.Stream(context.Background(), req)
		if err != nil {
			b.Fatal(err)
		}
		n := 0
		for s.Next() {
			_ = s.Current()
			n++
		}
		if n < 3 {
			b.Fatal("short stream")
		}
		s.Close()
	}
}

// MustNew builds a provider with newFn (an adapter's New) from cfg after
// applying mods to it, failing the test on error.
func MustNew[C, P any](t testing.TB, newFn func(C) (P, error), cfg C, mods ...func(*C)) P {
	t.Helper()
	for _, m := range mods {
		m(&cfg)
	}
	p, err := newFn(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// SimpleRequest is a one-message request ("hi") for model, for tests that
// care about the answer rather than the request.
func SimpleRequest(model string) *llm.Request {
	return &llm.Request{Model: model, Messages: []events.Message{events.UserText("hi")}}
}

// SDKStream is the shape of the SDKs' own streams (openai-go, anthropic).
type SDKStream[T any] interface {
	Next() bool
	Current() T
	Err() error
	Close() error
}

// SDKCount reads s to its end, closes it and returns how many events it
// decoded and the stream's error (taken before Close).
func SDKCount[T any](s SDKStream[T]) (int, error) {
	n := 0
	for s.Next() {
		_ = s.Current()
		n++
	}
	err := s.Err()
	s.Close()
	return n, err
}

// BenchmarkSDK is the baseline next to BenchmarkStream: read reads one
// whole recorded stream with an SDK alone and returns how many events it
// decoded, b.N times, with body's size as the bytes per operation. An
// error or an empty stream fails the benchmark.
func BenchmarkSDK(b *testing.B, body []byte, read func() (int, error)) {
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		n, err := read()
		if err != nil || n == 0 {
			b.Fatalf("%d events, err %v", n, err)
		}
	}
}

// AssertJSON fails the test unless got (a request body) and want are the
// same JSON value: key order and spacing do not matter, values and their
// types do. The failure shows both, indented.
func AssertJSON(t testing.TB, got []byte, want string) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("body %q: %v", got, err)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("want: %v", err)
	}
	if !reflect.DeepEqual(g, w) {
		gb, _ := json.MarshalIndent(g, "", " ")
		wb, _ := json.MarshalIndent(w, "", " ")
		t.Fatalf("request body\n got %s\nwant %s", gb, wb)
	}
}

// CheckCloseUnblocks streams req from p (whose server stalls after its first
// events, with no idle timeout in reach), reads until the first delta, then
// closes the stream from another goroutine while Next waits for the
// provider: Next must return within 10s. llm.Normalize reads the built-in
// adapters' streams inline (llm.SelfBounded), so it is the adapter's Close
// that must end the wait.
func CheckCloseUnblocks(t *testing.T, p llm.Provider, req *llm.Request) {
	t.Helper()
	s, err := p.Stream(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	for s.Next() {
		if _, ok := s.Current().(events.BlockDelta); ok {
			break
		}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for s.Next() {
		}
	}()
	time.Sleep(20 * time.Millisecond) // let Next wait for the provider
	if err := s.Close(); err != nil {
		t.Logf("close: %v", err)
	}
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Next still waits 10s after Close")
	}
}
