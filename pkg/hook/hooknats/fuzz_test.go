package hooknats_test

import (
	"errors"
	"testing"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/hook/hooknats"
)

// FuzzDecodeResponse: any reply body decodes to a valid response or an
// error matching ErrInvalidReply, never a panic.
func FuzzDecodeResponse(f *testing.F) {
	f.Add([]byte(`{"result":"continue"}`), "before_tool_call")
	f.Add([]byte(`{"result":"skip","reason":"no"}`), "after_tool_call")
	f.Add([]byte(`{"result":"continue_with_messages","messages":[{"role":"user","content":"again"}]}`), "on_turn_end")
	f.Add([]byte(`{"specversion":"1.0","id":"1","source":"/x","type":"llmw.hook.response","data":{"result":"cancel"}}`), "on_message_send")
	f.Add([]byte(`{"tool_call":{"id":"","name":"x"}}`), "before_tool_call")
	f.Add([]byte(``), "on_abort")
	f.Add([]byte(`[1,2]`), "on_abort")
	f.Fuzz(func(t *testing.T, body []byte, ev string) {
		resp, err := hooknats.DecodeResponse(nil, body, events.HookEvent(ev))
		if err != nil {
			if !errors.Is(err, hooknats.ErrInvalidReply) {
				t.Fatalf("error %v does not match ErrInvalidReply", err)
			}
			return
		}
		if err := resp.ValidateFor(events.HookEvent(ev)); err != nil {
			t.Fatalf("accepted an invalid response: %v", err)
		}
	})
}
