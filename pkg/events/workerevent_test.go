package events_test

import (
	"errors"
	"reflect"
	"testing"

	"github.com/llmworker/llmworker/pkg/events"
)

// Each worker event's CloudEvent type has one Go type and one channel, as
// docs/protocol.md §5 lists them; decoding picks the type, and the type
// says its channel (block events by their block type).
func TestWorkerEventTypesAndChannels(t *testing.T) {
	cases := []struct {
		typ, data string
		ch        events.Channel
	}{
		{"llmw.turn.started", `{"turn_id":"t"}`, "turn"},
		{"llmw.turn.step", `{"step":1}`, "turn"},
		{"llmw.turn.paused", `{"reason":"r","pending":[]}`, "turn"},
		{"llmw.turn.resumed", `{}`, "turn"},
		{"llmw.turn.completed", `{"messages":[],"stop_reason":"end_turn","usage":{}}`, "turn"},
		{"llmw.turn.failed", `{"reason":"r"}`, "turn"},
		{"llmw.turn.aborted", `{"reason":"r"}`, "turn"},
		{"llmw.block.start", `{"index":0,"block_type":"thinking","step":1}`, "thinking"},
		{"llmw.block.start", `{"index":0,"block_type":"tool_result","tool_use_id":"c","step":1}`, "text"},
		{"llmw.block.delta", `{"index":0,"input_json":"{","step":1}`, "tool"},
		{"llmw.block.delta", `{"index":0,"text":"x","step":1}`, "text"},
		{"llmw.block.stop", `{"index":0,"block_type":"tool_use","stop_reason":"tool_use","step":1}`, "tool"},
		{"llmw.block.abort", `{"index":0,"block_type":"text","reason":"r","step":1}`, "text"},
		{"llmw.text.complete", `{"step":1,"index":0,"text":"x"}`, "text"},
		{"llmw.toolcall.complete", `{"step":1,"id":"c","name":"n","input":{}}`, "tool"},
		{"llmw.tool.started", `{"call_id":"c","name":"n"}`, "tool"},
		{"llmw.tool.progress", `{"call_id":"c","name":"n","progress":1,"total":2,"message":"half"}`, "tool"},
		{"llmw.tool.result", `{"call_id":"c","name":"n","content":"","is_error":false,"duration_ms":0}`, "tool"},
		{"llmw.tool.skipped", `{"call_id":"c","name":"n","reason":"r"}`, "tool"},
		{"llmw.hook.decision", `{"hook":"h","event":"before_tool_call","result":"skip","ms":1}`, "hook"},
		{"llmw.hook.message", `{"hook":"h","event":"on_abort","messages":[]}`, "hook"},
		{"llmw.usage", `{"step":1,"usage":{},"total":{}}`, "usage"},
	}
	goTypes := map[string]string{}
	for _, c := range cases {
		ev, err := events.DecodeWorkerEvent(c.typ, []byte(c.data))
		if err != nil {
			t.Fatalf("%s %s: %v", c.typ, c.data, err)
		}
		if ev.WorkerType() != c.typ || ev.Channel() != c.ch {
			t.Errorf("%s: %T says type %s channel %s, want channel %s", c.typ, ev, ev.WorkerType(), ev.Channel(), c.ch)
		}
		gt := reflect.TypeOf(ev).String()
		if prev, ok := goTypes[gt]; ok && prev != c.typ {
			t.Errorf("%s and %s share the Go type %s", prev, c.typ, gt)
		}
		goTypes[gt] = c.typ
	}
	if _, err := events.DecodeWorkerEvent("llmw.llm.block.delta", []byte(`{"index":0,"text":"x"}`)); !errors.Is(err, events.ErrUnknownType) {
		t.Errorf("a provider stream event decoded as a worker event: %v", err)
	}
}

// Data that is not its type's JSON is ErrInvalid (not ErrUnknownType), with
// no event, and names the field at fault where there is one.
func TestDecodeWorkerEventInvalid(t *testing.T) {
	cases := []struct{ typ, data, field string }{
		{"llmw.turn.step", `{"step":"one"}`, "step"},
		{"llmw.turn.failed", `{"reason":7}`, "reason"},
		{"llmw.tool.result", `{"call_id":"c","name":"n","is_error":"no"}`, "is_error"},
		{"llmw.block.start", `{"index":0,"block_type":"image","step":1}`, ""},
		{"llmw.block.delta", `{"index":0,"step":1}`, ""},
		{"llmw.usage", `{"step":1`, ""},
		{"llmw.turn.started", ``, ""},
	}
	for _, c := range cases {
		ev, err := events.DecodeWorkerEvent(c.typ, []byte(c.data))
		if ev != nil || !errors.Is(err, events.ErrInvalid) || errors.Is(err, events.ErrUnknownType) {
			t.Errorf("%s %s: %v, %v; want no event and ErrInvalid", c.typ, c.data, ev, err)
			continue
		}
		var fe *events.FieldError
		if c.field != "" && (!errors.As(err, &fe) || fe.Field != c.field) {
			t.Errorf("%s %s: %v does not name field %q", c.typ, c.data, err, c.field)
		}
	}
	env := &events.Envelope{Type: "llmw.turn.step", Data: []byte(`{"step":2}`)}
	if ev, err := events.DecodeWorkerEnvelope(env); err != nil || ev != (events.TurnStep{Step: 2}) {
		t.Errorf("DecodeWorkerEnvelope = %#v, %v", ev, err)
	}
}
