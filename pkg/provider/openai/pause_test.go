package openai_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/provider/providertest"
)

// TestFirstCallStopsWhenTheNextBegins: Chat Completions streams parallel
// tool calls one after another, so the first call's block stops when the
// second begins, before the second's arguments end, and a tool that may
// start early does. The recorded stream is held after the second call's
// first chunk (its name), before its arguments.
func TestFirstCallStopsWhenTheNextBegins(t *testing.T) {
	const fixture = "openai-chat/parallel-tool-calls-streamed-args_gpt-4o.sse"
	body := providertest.MustLoadFixture(t, fixture)
	at := bytes.Index(body, []byte(`{"index":1,"function":{"arguments":"{}"}}`))
	if at < 0 {
		t.Fatal("the fixture's second call has no argument chunk")
	}
	at = bytes.LastIndex(body[:at], []byte("data: "))
	const firstCall, secondCall = "call_NS4iQj14cDFwc0BnrKqDHavt", "call_SkGkkGDvHQEEk0CGbnAh2AQw"
	if !bytes.Contains(body[:at], []byte(firstCall)) || !bytes.Contains(body[:at], []byte(secondCall)) {
		t.Fatal("the fixture's calls are not where this test expects them")
	}
	pause := providertest.NewPause(t)
	srv := providertest.NewServer(t, providertest.Response{Body: body, Hold: pause.Hold(), HoldAt: at})
	s, err := newProvider(t, srv).Stream(t.Context(), simpleRequest())
	if err != nil {
		t.Fatal(err)
	}
	all := providertest.StopDuringPause(t, s, pause, firstCall, 2*time.Second)
	if err := providertest.StrictWellFormed(all); err != nil {
		t.Fatalf("not well-formed: %v", err)
	}
	got := summarize(t, all)
	want := []tool{{firstCall, "get_weather", `{"city": "Mexico City"}`}, {secondCall, "get_product_name", `{}`}}
	if len(got.Tools) != 2 || got.Tools[0] != want[0] || got.Tools[1] != want[1] || got.Stop != events.StopToolUse {
		t.Fatalf("tools %+v stop %q, want %+v and tool_use", got.Tools, got.Stop, want)
	}
}
