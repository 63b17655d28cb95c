package events_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/llmworker/llmworker/pkg/events"
)

func FuzzDecodeStreamEvent(f *testing.F) {
	seeds := []struct{ typ, data string }{
		{events.TypeLLMBlockDelta, `{"index":0,"text":"hi"}`},
		{events.TypeLLMBlockStart, `{"index":1,"block_type":"tool_use","id":"c","name":"n"}`},
		{events.TypeLLMBlockStop, `{"index":1,"block_type":"tool_use","stop_reason":"tool_use","signature":"s"}`},
		{events.TypeLLMUsage, `{"input_tokens":1,"output_tokens":2}`},
		{events.TypeLLMStatus, `{"status":"failed"}`},
		{events.TypeLLMError, `{"code":"x","message":"y"}`},
		{events.TypeLLMBlockAbort, `{"index":0,"block_type":"text","reason":"r"}`},
	}
	for _, s := range seeds {
		f.Add(s.typ, []byte(s.data))
	}
	f.Fuzz(func(t *testing.T, typ string, data []byte) {
		ev, err := events.DecodeStreamEvent(typ, data)
		if err != nil {
			return
		}
		// Whatever decodes re-encodes to JSON that decodes to the same event.
		b, err := events.MarshalEvent(ev)
		if err != nil {
			t.Fatalf("marshal %#v: %v", ev, err)
		}
		ev2, err := events.DecodeStreamEvent(typ, b)
		if err != nil {
			t.Fatalf("re-decode %s: %v", b, err)
		}
		b2, _ := events.MarshalEvent(ev2)
		if string(b) != string(b2) {
			t.Fatalf("unstable: %s vs %s", b, b2)
		}
	})
}

func FuzzDecodeEnvelope(f *testing.F) {
	e := testEnvelope()
	structured, _ := e.StructuredBody()
	f.Add([]byte("1.0"), []byte("id"), []byte("7"), structured)
	f.Add([]byte(""), []byte(""), []byte(""), []byte(`{"specversion":"1.0","id":"a","source":"/s","type":"t","seq":"x"}`))
	f.Fuzz(func(t *testing.T, spec, id, seq, body []byte) {
		h := map[string][]string{}
		if len(spec) > 0 {
			h[events.HeaderSpecVersion] = []string{string(spec)}
			h[events.HeaderID] = []string{string(id)}
			h[events.HeaderSource] = []string{"/llmw/x/y"}
			h[events.HeaderType] = []string{"t"}
			h[events.HeaderSeq] = []string{string(seq)}
		}
		env, err := events.DecodeEnvelope(h, body)
		if err != nil {
			return
		}
		if env.ID == "" || env.Source == "" || env.Type == "" {
			t.Fatalf("accepted an envelope without required attributes: %#v", env)
		}
	})
}

func FuzzDecodeRequests(f *testing.F) {
	f.Add([]byte(`{"request_id":"r1","model":"openai:gpt","messages":[{"role":"user","content":"hi"}]}`))
	f.Add([]byte(`{"turn_id":"t","model":"a:b","messages":[{"role":"assistant","content":[{"type":"tool_use","id":"c","name":"n","input":{}}]}]}`))
	f.Add([]byte(`{"turn_id":"t","decisions":{"c":{"input":{}}}}`))
	f.Add([]byte(`{"result":"skip","tool_call":{"id":"c","name":"n","input":{}}}`))
	f.Add([]byte(`{"turn_id":"t","decisions":{"a":"approve","d":{"deny":"no"},"x":"maybe"}}`))
	f.Add([]byte(`{"name":"h","event":5,"subject":"s"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		if r, err := events.Decode[events.CompletionRequest](data); err == nil {
			if _, err := json.Marshal(r); err != nil {
				t.Fatalf("valid request does not marshal: %v", err)
			}
		}
		if r, err := events.Decode[events.TurnRequest](data); err == nil {
			b, err := json.Marshal(r)
			if err != nil {
				t.Fatalf("valid turn does not marshal: %v", err)
			}
			if _, err := events.Decode[events.TurnRequest](b); err != nil {
				t.Fatalf("re-decode %s: %v", b, err)
			}
		}
		if r, err := events.Decode[events.ResumeRequest](data); err == nil {
			b, err := json.Marshal(r)
			if err != nil {
				t.Fatalf("valid resume does not marshal: %v", err)
			}
			back, err := events.Decode[events.ResumeRequest](b)
			if err != nil {
				t.Fatalf("re-decode %s: %v", b, err)
			}
			for id, d := range r.Decisions {
				if back.Decisions[id].Kind != d.Kind || back.Decisions[id].Reason != d.Reason {
					t.Fatalf("decision %q: %+v became %+v", id, d, back.Decisions[id])
				}
			}
		} else if !errors.Is(err, events.ErrInvalid) {
			t.Fatalf("resume error %v does not match ErrInvalid", err)
		}
		for _, err := range []error{
			second(events.Decode[events.HookResponse](data)),
			second(events.Decode[events.HookRequest](data)),
			second(events.Decode[events.ToolCallRequest](data)),
			second(events.Decode[events.HookRegistration](data)),
		} {
			if err != nil && !errors.Is(err, events.ErrInvalid) {
				t.Fatalf("decode error %v does not match ErrInvalid", err)
			}
		}
	})
}

func second[T any](_ T, err error) error { return err }

// FuzzDecodeWorkerEvent: whatever arrives as a worker event decodes to
// the Go type of its CloudEvent type (or an error), never panics, and
// re-encodes to data that decodes to the same event.
func FuzzDecodeWorkerEvent(f *testing.F) {
	seeds := []struct{ typ, data string }{
		{events.TypeBlockDelta, `{"index":0,"text":"hi","step":1}`},
		{events.TypeBlockStart, `{"index":1,"block_type":"tool_use","id":"c","name":"n","step":2}`},
		{events.TypeTurnFailed, `{"reason":"r","code":"max_steps"}`},
		{events.TypeTurnPaused, `{"reason":"r","pending":[{"id":"c","name":"n","input":{}}]}`},
		{events.TypeToolResult, `{"call_id":"c","name":"n","content":"ok","is_error":false,"duration_ms":3}`},
		{events.TypeUsage, `{"step":1,"usage":{"input_tokens":1},"total":{"input_tokens":1}}`},
		{"llmw.nope", `{}`},
	}
	for _, s := range seeds {
		f.Add(s.typ, []byte(s.data))
	}
	f.Fuzz(func(t *testing.T, typ string, data []byte) {
		ev, err := events.DecodeWorkerEvent(typ, data)
		if err != nil {
			if ev != nil {
				t.Fatalf("an event and an error: %#v, %v", ev, err)
			}
			// An unknown type is ErrUnknownType, whatever the data; data
			// a known type cannot read is ErrInvalid.
			_, known := events.DecodeWorkerEvent(typ, nil)
			if unknown := errors.Is(known, events.ErrUnknownType); unknown != errors.Is(err, events.ErrUnknownType) || !unknown && !errors.Is(err, events.ErrInvalid) {
				t.Fatalf("%s %q: error %v (type unknown: %v)", typ, data, err, unknown)
			}
			return
		}
		if ev.WorkerType() != typ {
			t.Fatalf("decoded %T (type %s) for %s", ev, ev.WorkerType(), typ)
		}
		b, err := events.MarshalWorkerEvent(ev)
		if err != nil {
			t.Fatalf("marshal %#v: %v", ev, err)
		}
		ev2, err := events.DecodeWorkerEvent(typ, b)
		if err != nil {
			t.Fatalf("re-decode %s: %v", b, err)
		}
		b2, _ := events.MarshalWorkerEvent(ev2)
		if string(b) != string(b2) {
			t.Fatalf("unstable: %s vs %s", b, b2)
		}
	})
}
