package events_test

import (
	"testing"

	"github.com/llmworker/llmworker/pkg/events"
)

// A completed event names where its messages begin in the transcript
// (docs/protocol.md §5): transcript_length less its messages. One without
// transcript_length carries the whole transcript.
func TestTurnCompletedFrom(t *testing.T) {
	for _, c := range []struct {
		name string
		data string
		from int
	}{
		{"third turn of a session", `{"messages":[{"role":"user","content":"c"},{"role":"assistant","content":"C"}],"transcript_length":6,"session_id":"s1","stop_reason":"end_turn","usage":{}}`, 4},
		{"turn without a session", `{"messages":[{"role":"user","content":"a"},{"role":"assistant","content":"A"}],"transcript_length":2,"stop_reason":"end_turn","usage":{}}`, 0},
		{"whole transcript, without transcript_length", `{"messages":[{"role":"user","content":"a"},{"role":"assistant","content":"A"},{"role":"user","content":"b"},{"role":"assistant","content":"B"}],"stop_reason":"end_turn","usage":{}}`, 0},
	} {
		ev, err := events.DecodeWorkerEvent(events.TypeTurnCompleted, []byte(c.data))
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got := ev.(events.TurnCompleted).From(); got != c.from {
			t.Errorf("%s: From() = %d, want %d", c.name, got, c.from)
		}
	}
}
