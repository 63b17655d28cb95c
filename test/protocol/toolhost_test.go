package protocol_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/llmworker/llmworker/pkg/llm/llmtest"
	"github.com/llmworker/llmworker/pkg/natstest"
	"github.com/llmworker/llmworker/pkg/turn"
)

// The tool host of docs/protocol.md §9.2, written from §6 alone: every
// message below is one the document shows, sent and read as a raw
// nats.Msg on the user's connection.

// The catalog entry of §9.2.
const hostEchoEntry = `{"name":"echo","description":"Answers its text.",` +
	`"input_schema":{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]},"timeout_ms":10000}`

// rawToolHost hosts the tool echo as host h1.
type rawToolHost struct {
	s       *stack
	pulls   *inbox // where the calls it pulls arrive
	pullBox string
	cancels *inbox // llmw.tool.cancel.*.*
}

// hostHeaders are the headers of the host's CloudEvent of type typ
// (binary mode, §1) with Nats-Msg-Id.
func hostHeaders(typ, id, msgID string) map[string]string {
	return map[string]string{"ce-specversion": "1.0", "ce-id": id, "ce-source": "/my-host/h1", "ce-type": typ,
		"content-type": "application/json", "Nats-Msg-Id": msgID}
}

// startRawToolHost registers echo in the catalog, creates the consumer
// and subscribes to cancels (§9.2, "Start").
func startRawToolHost(s *stack) *rawToolHost {
	s.t.Helper()
	// The claim, then the entry, each a JetStream publish with Nats-TTL.
	ack := s.request("$KV.LLMW_TOOLS.echo.h1", map[string]string{"Nats-TTL": "30s"}, "h1")
	if ack["stream"] != "KV_LLMW_TOOLS" {
		s.t.Fatalf("claim acknowledged by %v", ack)
	}
	s.request("$KV.LLMW_TOOLS.echo", map[string]string{"Nats-TTL": "30s"}, hostEchoEntry)
	// The shared durable pull consumer.
	created := s.request("$JS.API.CONSUMER.CREATE.LLMW_TOOLCALLS.tool_echo.llmw.tool.call.echo", nil,
		`{"stream_name":"LLMW_TOOLCALLS","config":{"durable_name":"tool_echo","filter_subject":"llmw.tool.call.echo",`+
			`"ack_policy":"explicit","ack_wait":30000000000,"max_deliver":-1,"max_ack_pending":-1}}`)
	if created["type"] != "io.nats.jetstream.api.v1.consumer_create_response" || created["name"] != "tool_echo" {
		s.t.Fatalf("consumer create answered %v", created)
	}
	h := &rawToolHost{s: s, pullBox: nats.NewInbox(), cancels: s.subscribe("llmw.tool.cancel.*.*")}
	h.pulls = s.subscribe(h.pullBox)
	return h
}

// pull asks for one call (§9.2, "A call") and returns it.
func (h *rawToolHost) pull() *nats.Msg {
	h.s.t.Helper()
	if err := h.s.nc.PublishMsg(&nats.Msg{Subject: "$JS.API.CONSUMER.MSG.NEXT.LLMW_TOOLCALLS.tool_echo", Reply: h.pullBox,
		Data: []byte(`{"batch":1,"expires":30000000000}`)}); err != nil {
		h.s.t.Fatal(err)
	}
	m := h.pulls.next()
	if st := m.Header.Get("Status"); st != "" {
		h.s.t.Fatalf("pull answered with status %s %s instead of a call", st, m.Header.Get("Description"))
	}
	return m
}

// toolCall is the data of a llmw.tool.call as §6 documents it.
type toolCall struct {
	CallID   string          `json:"call_id"`
	TurnID   string          `json:"turn_id"`
	Name     string          `json:"name"`
	Input    json.RawMessage `json:"input"`
	Deadline time.Time       `json:"deadline"`
}

// checkCall checks a pulled call against §9.2 and returns its data.
func (h *rawToolHost) checkCall(m *nats.Msg, turnID, callID string) toolCall {
	h.s.t.Helper()
	var c toolCall
	if err := json.Unmarshal(m.Data, &c); err != nil {
		h.s.t.Fatalf("call body %s: %v", m.Data, err)
	}
	if m.Subject != "llmw.tool.call.echo" || m.Header.Get("ce-type") != "llmw.tool.call" || m.Header.Get("ce-specversion") != "1.0" ||
		m.Header.Get("ce-subject") != turnID || m.Header.Get("ce-turnid") != turnID || m.Header.Get("Nats-Msg-Id") != turnID+"."+callID ||
		!strings.HasPrefix(m.Reply, "$JS.ACK.LLMW_TOOLCALLS.tool_echo.") {
		h.s.t.Fatalf("call on %s reply %s headers %v", m.Subject, m.Reply, m.Header)
	}
	if c.CallID != callID || c.TurnID != turnID || c.Name != "echo" || string(c.Input) != `{"text":"hi"}` {
		h.s.t.Fatalf("call body %s", m.Data)
	}
	// timeout_ms 10000: the turn waits until 10 s after it published the call.
	if left := time.Until(c.Deadline); left <= 0 || left > 10*time.Second {
		h.s.t.Fatalf("call deadline %v is %v away, want within timeout_ms", c.Deadline, left)
	}
	return c
}

// answer publishes the call's result and then acknowledges the call
// (§6, steps 4 and 5); it returns the result's acknowledgement.
func (h *rawToolHost) answer(call *nats.Msg, turnID, callID, content string, isError bool) map[string]any {
	h.s.t.Helper()
	res, _ := json.Marshal(map[string]any{"call_id": callID, "turn_id": turnID, "name": "echo", "content": content, "is_error": isError, "duration_ms": 1})
	ack := h.s.request("llmw.tool.result."+turnID+"."+callID, hostHeaders("llmw.tool.result", "r-"+turnID, turnID+"."+callID), string(res))
	if err := h.s.nc.Publish(call.Reply, []byte("+ACK")); err != nil {
		h.s.t.Fatal(err)
	}
	return ack
}

// consumerInfo is $JS.API.CONSUMER.INFO of tool_echo.
func (h *rawToolHost) consumerInfo() map[string]any {
	h.s.t.Helper()
	r, err := h.s.nc.Request("$JS.API.CONSUMER.INFO.LLMW_TOOLCALLS.tool_echo", nil, waitFor)
	if err != nil {
		h.s.t.Fatal(err)
	}
	var info map[string]any
	if err := json.Unmarshal(r.Data, &info); err != nil || info["error"] != nil {
		h.s.t.Fatalf("consumer info %s", r.Data)
	}
	return info
}

// waitAcked waits until the consumer has no call pending an ack.
func (h *rawToolHost) waitAcked() {
	h.s.t.Helper()
	natstest.EventuallyWithin(h.s.t, waitFor, "no call pending its ack on tool_echo", func() bool {
		return h.consumerInfo()["num_ack_pending"] == float64(0)
	})
}

// transcriptResult finds the tool_result part of callID in the messages of
// a llmw.turn.completed.
func transcriptResult(t *testing.T, completed *nats.Msg, callID string) map[string]any {
	t.Helper()
	var done struct {
		Messages []struct {
			Role    string           `json:"role"`
			Content []map[string]any `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(completed.Data, &done); err != nil {
		t.Fatalf("turn.completed %s: %v", completed.Data, err)
	}
	for _, m := range done.Messages {
		for _, p := range m.Content {
			if p["type"] == "tool_result" && p["tool_use_id"] == callID {
				return p
			}
		}
	}
	t.Fatalf("no tool_result of %s in %s", callID, completed.Data)
	return nil
}

// §9.2: a tool host registers its tool, takes a turn's call from its
// consumer, answers it and stops; the turn completes with the host's
// result in its transcript.
func TestWalkToolHost(t *testing.T) {
	s := newStack(t)
	s.startIngestAs("openai", llmtest.NewScripted(
		llmtest.ToolStep(llmtest.ToolCallSpec{ID: "call_1", Name: "echo", Input: `{"text":"hi"}`}),
		llmtest.TextStep("The tool said hi."),
	))
	s.startTurn(turn.Config{})
	h := startRawToolHost(s)

	evs := s.subscribe("llmw.events.*.t-04.>")
	s.request("llmw.turn.submit", ceHeaders("llmw.turn.submit", "1"),
		`{"turn_id":"t-04","model":"openai:gpt-4.1-mini","messages":[{"role":"user","content":"Echo hi"}],"tools":["echo"]}`)

	// The call.
	call := h.pull()
	h.checkCall(call, "t-04", "call_1")
	// The turn asked for it in the run that published it.
	if !strings.Contains(string(call.Data), `"first_publish":true`) {
		t.Fatalf("call body %s, want first_publish", call.Data)
	}
	// Not answered yet: no stored result (asked of the stream's leader).
	stored, err := s.nc.Request("$JS.API.STREAM.MSG.GET.LLMW_TOOLRESULTS", []byte(`{"last_by_subj":"llmw.tool.result.t-04.call_1"}`), waitFor)
	var none struct {
		Error struct {
			Code    int `json:"code"`
			ErrCode int `json:"err_code"`
		} `json:"error"`
	}
	if err != nil || json.Unmarshal(stored.Data, &none) != nil || none.Error.Code != 404 || none.Error.ErrCode != 10037 {
		t.Fatalf("stored result lookup: %v %v", stored, err)
	}
	// In progress.
	if err := s.nc.Publish(call.Reply, []byte("+WPI")); err != nil {
		t.Fatal(err)
	}
	// The result, then the ack.
	ack := h.answer(call, "t-04", "call_1", "hi", false)
	if ack["stream"] != "LLMW_TOOLRESULTS" || ack["duplicate"] != nil {
		t.Fatalf("result acknowledged %v", ack)
	}
	h.waitAcked()

	got := evs.until("llmw.turn.completed", "llmw.turn.failed", "llmw.turn.aborted")
	last := got[len(got)-1]
	if last.Header.Get("ce-type") != "llmw.turn.completed" {
		t.Fatalf("turn ended %s %s", last.Header.Get("ce-type"), last.Data)
	}
	var result map[string]any
	for _, m := range got {
		if m.Header.Get("ce-type") == "llmw.tool.result" {
			if err := json.Unmarshal(m.Data, &result); err != nil {
				t.Fatal(err)
			}
		}
	}
	if result["call_id"] != "call_1" || result["content"] != "hi" || result["is_error"] != false {
		t.Fatalf("llmw.tool.result event %v", result)
	}
	if p := transcriptResult(t, last, "call_1"); p["content"] != "hi" || p["is_error"] == true {
		t.Fatalf("tool_result in the transcript %v", p)
	}

	// A second result of the call (a retry, a call run twice) is not stored.
	dup := s.request("llmw.tool.result.t-04.call_1", hostHeaders("llmw.tool.result", "r-again", "t-04.call_1"),
		`{"call_id":"call_1","turn_id":"t-04","name":"echo","content":"hi again","is_error":false,"duration_ms":1}`)
	if dup["duplicate"] != true {
		t.Fatalf("second result acknowledged %v, want a duplicate", dup)
	}
	stored, err = s.nc.Request("$JS.API.STREAM.MSG.GET.LLMW_TOOLRESULTS", []byte(`{"last_by_subj":"llmw.tool.result.t-04.call_1"}`), waitFor)
	var one struct {
		Message struct {
			Seq  int    `json:"seq"`
			Data []byte `json:"data"`
		} `json:"message"`
	}
	if err != nil || json.Unmarshal(stored.Data, &one) != nil || one.Message.Seq != 1 || !strings.Contains(string(one.Message.Data), `"content":"hi"`) {
		t.Fatalf("stored result after the duplicate: %v %v", stored, err)
	}

	// Stop: withdraw the claim; then, no other host claiming echo, purge
	// the entry at the revision read.
	s.request("$KV.LLMW_TOOLS.echo.h1", map[string]string{"KV-Operation": "PURGE", "Nats-Rollup": "sub", "Nats-TTL": "1m"}, "")
	entry, err := s.nc.Request("$JS.API.DIRECT.GET.KV_LLMW_TOOLS.$KV.LLMW_TOOLS.echo", nil, waitFor)
	if err != nil || entry.Header.Get("Nats-Sequence") == "" || string(entry.Data) != hostEchoEntry {
		t.Fatalf("entry lookup: %v %v", entry, err)
	}
	js, err := jetstream.New(s.nc)
	if err != nil {
		t.Fatal(err)
	}
	kv, err := js.KeyValue(t.Context(), "LLMW_TOOLS")
	if err != nil {
		t.Fatal(err)
	}
	keys, err := kv.ListKeysFiltered(t.Context(), "echo.*")
	if err != nil {
		t.Fatal(err)
	}
	for k := range keys.Keys() {
		t.Fatalf("claim %s is still listed after the purge", k)
	}
	s.request("$KV.LLMW_TOOLS.echo", map[string]string{"KV-Operation": "PURGE", "Nats-Rollup": "sub", "Nats-TTL": "1m",
		"Nats-Expected-Last-Subject-Sequence": entry.Header.Get("Nats-Sequence")}, "")
	if _, err := kv.Get(t.Context(), "echo"); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Fatalf("echo after the host stopped: %v, want no entry", err)
	}
}

// §9.2, a cancel: two turns' calls share the id call_1; cancelling turn
// t-05 cancels its call only, named by turn and call. The host answers
// the cancelled call with an error result and t-06's call with its output.
func TestWalkToolHostCancel(t *testing.T) {
	s := newStack(t)
	// The model calls echo as call_1 in t-05, then in t-06, then answers
	// t-06 once its call has a result.
	s.startIngestAs("openai", llmtest.NewScripted(
		llmtest.ToolStep(llmtest.ToolCallSpec{ID: "call_1", Name: "echo", Input: `{"text":"hi"}`}),
		llmtest.ToolStep(llmtest.ToolCallSpec{ID: "call_1", Name: "echo", Input: `{"text":"hi"}`}),
		llmtest.TextStep("The tool said hi."),
	))
	s.startTurn(turn.Config{})
	h := startRawToolHost(s)

	ev5, ev6 := s.subscribe("llmw.events.*.t-05.>"), s.subscribe("llmw.events.*.t-06.>")
	s.request("llmw.turn.submit", ceHeaders("llmw.turn.submit", "1"),
		`{"turn_id":"t-05","model":"openai:gpt-4.1-mini","messages":[{"role":"user","content":"Echo hi"}],"tools":["echo"]}`)
	call5 := h.pull()
	h.checkCall(call5, "t-05", "call_1")
	s.request("llmw.turn.submit", ceHeaders("llmw.turn.submit", "2"),
		`{"turn_id":"t-06","model":"openai:gpt-4.1-mini","messages":[{"role":"user","content":"Echo hi"}],"tools":["echo"]}`)
	call6 := h.pull()
	h.checkCall(call6, "t-06", "call_1")

	if err := s.nc.Publish("llmw.turn.cancel.t-05", nil); err != nil {
		t.Fatal(err)
	}
	cancel := h.cancels.next()
	var ids map[string]string
	if err := json.Unmarshal(cancel.Data, &ids); err != nil || cancel.Subject != "llmw.tool.cancel.t-05.call_1" ||
		cancel.Header.Get("ce-type") != "llmw.tool.cancel" || cancel.Header.Get("ce-subject") != "t-05" ||
		ids["turn_id"] != "t-05" || ids["call_id"] != "call_1" {
		t.Fatalf("cancel on %s, headers %v, body %s; want llmw.tool.cancel.t-05.call_1", cancel.Subject, cancel.Header, cancel.Data)
	}
	h.answer(call5, "t-05", "call_1", `tool "echo" was cancelled`, true)
	got := ev5.until("llmw.turn.completed", "llmw.turn.failed", "llmw.turn.aborted")
	var end map[string]string
	if last := got[len(got)-1]; last.Header.Get("ce-type") != "llmw.turn.aborted" || json.Unmarshal(last.Data, &end) != nil || end["code"] != "cancelled" {
		t.Fatalf("t-05 ended %s %s", last.Header.Get("ce-type"), last.Data)
	}

	h.answer(call6, "t-06", "call_1", "hi", false)
	got = ev6.until("llmw.turn.completed", "llmw.turn.failed", "llmw.turn.aborted")
	last := got[len(got)-1]
	if last.Header.Get("ce-type") != "llmw.turn.completed" {
		t.Fatalf("t-06 ended %s %s", last.Header.Get("ce-type"), last.Data)
	}
	if p := transcriptResult(t, last, "call_1"); p["content"] != "hi" || p["is_error"] == true {
		t.Fatalf("t-06's tool_result %v", p)
	}
	h.waitAcked()
	select {
	case m := <-h.cancels.ch:
		t.Fatalf("another cancel: %s", m.Subject)
	default:
	}
}
