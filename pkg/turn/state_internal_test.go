package turn

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/transcript"
	"github.com/llmworker/llmworker/pkg/worker"
)

// TestMarshalStateIsJSONMarshal: the state written at every checkpoint
// decodes to what encoding/json's encoding of it decodes to.
func TestMarshalStateIsJSONMarshal(t *testing.T) {
	temp := 0.2
	st := &State{
		Version: StateVersion, Status: StatusPaused, Owner: "i-1", Seq: 42,
		Request:       &events.TurnRequest{TurnID: "t<1>", Model: "openai:gpt", System: `"messages":null`, Messages: []events.Message{}, Temperature: &temp},
		RequestDigest: "abc", SessionPrefix: 1, Updated: time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC),
		Checkpoint: &worker.Checkpoint{
			Version: worker.CheckpointVersion, TurnID: "t<1>", SessionID: "s&1", Phase: worker.PhasePaused, Step: 3,
			Messages: []events.Message{
				events.UserText("hi <b>"),
				{Role: events.RoleAssistant, Content: []events.Part{events.ToolUsePart("c1", "echo", json.RawMessage(`{"messages":null}`))}},
			},
			Pending: []worker.PendingCall{{Call: events.ToolCall{ID: "c1", Name: "echo", Input: json.RawMessage(`{"messages":null}`)}, State: worker.CallPaused, Hook: "h"}},
			Append:  []events.Message{events.UserText("more")},
			Vars:    map[string]string{"messages": "null"},
			Usage:   events.UsageEvent{InputTokens: events.Int64(3)},
			Pause:   &worker.Pause{Event: events.HookBeforeToolCall, Hook: "h", Reason: "ask"},
		},
	}
	got, err := marshalState(st)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := json.Marshal(st)
	var a, b State
	if err := json.Unmarshal(got, &a); err != nil {
		t.Fatalf("decode %s: %v", got, err)
	}
	_ = json.Unmarshal(want, &b)
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	var ga, gb any
	_ = json.Unmarshal(got, &ga)
	_ = json.Unmarshal(want, &gb)
	if !reflect.DeepEqual(ga, gb) {
		t.Fatalf("the encodings differ in content:\ngot  %s\nwant %s", got, want)
	}
	// Without a checkpoint (an ended turn) it is json.Marshal's.
	st.Checkpoint = nil
	if got, _ := marshalState(st); string(got) != string(must(json.Marshal(st))) {
		t.Fatalf("no checkpoint: %s", got)
	}
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}

// BenchmarkMarshalState encodes the state written at the last checkpoint
// of a ten-step four-tool turn: json.Marshal (before marshalState) and
// marshalState.
func BenchmarkMarshalState(b *testing.B) {
	msgs := []events.Message{events.UserText("go")}
	for n := 0; n < 40; n += 4 {
		call, res := events.Message{Role: events.RoleAssistant}, events.Message{Role: events.RoleTool}
		for i := n; i < n+4; i++ {
			id := "call_" + string(rune('a'+i%26)) + string(rune('0'+i/26))
			call.Content = append(call.Content, events.ToolUsePart(id, "echo", json.RawMessage(`{"n":1}`)))
			res.Content = append(res.Content, events.ToolResultPart(id, "1", false))
		}
		msgs = append(msgs, call, res)
	}
	st := &State{Version: StateVersion, Status: StatusRunning, Owner: "i", Seq: 250,
		Request: &events.TurnRequest{TurnID: "t-1", Model: "test:m", Messages: []events.Message{}, Tools: []string{"echo"}},
		Checkpoint: &worker.Checkpoint{Version: worker.CheckpointVersion, TurnID: "t-1", Phase: worker.PhaseModel, Step: 10, Messages: msgs,
			Usage: events.UsageEvent{InputTokens: events.Int64(10)}}, Updated: time.Now()}
	for _, c := range []struct {
		name string
		f    func(*State) ([]byte, error)
	}{{"json.Marshal", func(s *State) ([]byte, error) { return json.Marshal(s) }}, {"marshalState", marshalState}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := c.f(st); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// A transcript read that timed out or met a stream without a leader
// leaves the request for its next delivery; one that found an item
// missing or undecodable fails the turn (docs/protocol.md §10, internal).
func TestTranscriptLostOnlyForGood(t *testing.T) {
	wrap := func(err error) error { return fmt.Errorf("%w: turn %q: %w", ErrTranscriptUnavailable, "t", err) }
	for _, c := range []struct {
		err  error
		lost bool
	}{
		{wrap(transcript.ErrMissing), true},
		{wrap(transcript.ErrCorrupt), true},
		{wrap(context.DeadlineExceeded), false},
		{wrap(nats.ErrTimeout), false},
		{wrap(&jetstream.APIError{Code: 503, Description: "JetStream system temporarily unavailable"}), false},
		{context.DeadlineExceeded, false},
	} {
		if got := transcriptLost(c.err); got != c.lost {
			t.Errorf("transcriptLost(%v) = %v, want %v", c.err, got, c.lost)
		}
	}
}
