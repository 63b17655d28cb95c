package worker

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/timeline"
)

// The assistant message lists the parts in block-index order whatever the
// order of the collectors (thinking at 0, text at 1 and 4, calls at 3, 2
// and a server call at 5), and the calls to run are the local ones in
// block-index order.
func TestAssembleFromOrdersByBlockIndex(t *testing.T) {
	texts := []timeline.CollectedText{{Index: 4, Text: "after"}, {Index: 1, Text: "before"}}
	thinks := []timeline.CollectedThinking{{Index: 0, Thinking: "hmm", Signature: "sig"}, {Index: 6, Signature: "only"}}
	collected := []timeline.CollectedCall{
		{Index: 3, ID: "b", Name: "t", Input: json.RawMessage(`{"x":2}`)},
		{Index: 5, ID: "srv", Name: "web", Server: true, Input: json.RawMessage(`{}`)},
		{Index: 2, ID: "a", Name: "t", Input: json.RawMessage(`{"x":1}`), Signature: "s2"},
	}
	msg, calls := assembleFrom("", texts, thinks, collected)
	want := events.Message{Role: events.RoleAssistant, Content: []events.Part{
		{Type: events.PartThinking, Thinking: "hmm", Signature: "sig"},
		{Type: events.PartText, Text: "before"},
		{Type: events.PartToolUse, ID: "a", Name: "t", Input: json.RawMessage(`{"x":1}`), Signature: "s2"},
		{Type: events.PartToolUse, ID: "b", Name: "t", Input: json.RawMessage(`{"x":2}`)},
		{Type: events.PartText, Text: "after"},
		{Type: events.PartThinking, Signature: "only", Redacted: true},
	}}
	if !reflect.DeepEqual(msg, want) {
		t.Fatalf("message\n got %+v\nwant %+v", msg, want)
	}
	if len(calls) != 2 || calls[0].ID != "a" || calls[1].ID != "b" {
		t.Fatalf("calls %+v, want a then b", calls)
	}

	// Only server calls: nothing to run.
	_, calls = assembleFrom("", nil, nil, []timeline.CollectedCall{{Index: 0, ID: "srv", Server: true}})
	if calls != nil {
		t.Fatalf("calls %+v, want none", calls)
	}
	// More parts than the sort's stack buffer.
	var many []timeline.CollectedText
	for i := 39; i >= 0; i-- {
		many = append(many, timeline.CollectedText{Index: i, Text: string(rune('a' + i%26))})
	}
	msg, _ = assembleFrom("", many, nil, nil)
	for i, p := range msg.Content {
		if p.Text != string(rune('a'+i%26)) {
			t.Fatalf("part %d = %q", i, p.Text)
		}
	}
}
