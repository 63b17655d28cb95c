package anthropic_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"testing"

	"go.uber.org/goleak"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/llm"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// Keep-alive connections of http.Transport outlive single tests;
		// they are closed with their servers.
		goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"),
	)
}

// collect drains s, failing the test if it does not end.
func collect(t testing.TB, s llm.Stream) []events.Event {
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

// wellFormed checks the invariants of DESIGN.md §3 (the stream contract);
// it is the test's own statement of them, independent of the adapter.
func wellFormed(evs []events.Event) error {
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

// call is a tool call as the stream shows it.
type call struct {
	ID, Name string
	Input    any
	Server   bool
	Aborted  bool
}

// summary is what a stream says, in the terms tests compare.
type summary struct {
	Text, Thinking string
	Signatures     []string // of thinking blocks, in order
	Calls          []call
	Results        []events.BlockStart // tool_result starts
	ResultTexts    []string
	Usage          *events.UsageEvent
	StopReason     events.StopReason // the last non-null block stop reason
	Errors         []events.ErrorEvent
	Status         events.StreamStatus
}

func summarize(t testing.TB, evs []events.Event) summary {
	t.Helper()
	var s summary
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
			b := blocks[e.Index]
			switch b.st.BlockType {
			case events.BlockThinking:
				s.Signatures = append(s.Signatures, e.Signature)
			case events.BlockToolUse:
				c := call{ID: b.st.ID, Name: b.st.Name, Server: b.st.Server}
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
				s.Calls = append(s.Calls, call{ID: b.st.ID, Name: b.st.Name, Server: b.st.Server, Aborted: true})
			}
		case events.UsageEvent:
			u := e
			s.Usage = &u
		case events.ErrorEvent:
			s.Errors = append(s.Errors, e)
		case events.StatusEvent:
			s.Status = e.Status
		}
	}
	return s
}

// fixedTransport answers every request with one SSE body, in memory: the
// SDK parses it exactly as from the network, without the network's noise
// (used by fuzzing and benchmarks).
type fixedTransport struct{ body []byte }

func (f fixedTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		_, _ = io.Copy(io.Discard, r.Body)
		_ = r.Body.Close()
	}
	return &http.Response{
		StatusCode: http.StatusOK, Status: "200 OK", Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header:  http.Header{"Content-Type": []string{"text/event-stream"}},
		Body:    io.NopCloser(bytes.NewReader(f.body)),
		Request: r, ContentLength: -1,
	}, nil
}

func i64(v int64) *int64 { return &v }

func ptrEq(a, b *int64) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return *a == *b
}

func fmtPtr(p *int64) string {
	if p == nil {
		return "nil"
	}
	return fmt.Sprint(*p)
}
