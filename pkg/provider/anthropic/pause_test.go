package anthropic_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/llm"
	"github.com/llmworker/llmworker/pkg/provider/anthropic"
	"github.com/llmworker/llmworker/pkg/provider/providertest"
)

// TestBlockStopDuringPause: a model that pauses between two blocks (a
// server tool, a slow next call) must not hold the first block's stop
// until the next block starts: the turn starts a read-only tool at its
// call's stop, and the pause is time it could run. The recorded stream is
// served as recorded, held after the first tool call's content_block_stop.
func TestBlockStopDuringPause(t *testing.T) {
	const fixture = "anthropic/parallel-tool-use-after-text-empty-json_claude-3-5-haiku.sse"
	body := providertest.MustLoadFixture(t, fixture)
	// The pause: after block 1 (the first tool_use) stops, before block 2
	// starts.
	at := bytes.Index(body, []byte("event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":2"))
	const firstCall = "toolu_017ngBid8gmdReTeroVSZf7r"
	if at < 0 || !bytes.Contains(body[:at], []byte(firstCall)) || !bytes.Contains(body[at:], []byte("toolu_01FJrHJrmnfEqR6NxkQ3yhpu")) {
		t.Fatal("the fixture's calls are not where this test expects them")
	}
	pause := providertest.NewPause(t)
	srv := providertest.NewServer(t, providertest.Response{Body: body, Hold: pause.Hold(), HoldAt: at})
	p, err := anthropic.New(anthropic.Config{APIKey: "test-key", BaseURL: srv.URL()})
	if err != nil {
		t.Fatal(err)
	}
	s, err := p.Stream(context.Background(), &llm.Request{Model: "anthropic:claude-test", Messages: []events.Message{events.UserText("hi")}})
	if err != nil {
		t.Fatal(err)
	}
	all := providertest.StopDuringPause(t, s, pause, firstCall, 2*time.Second)
	if err := providertest.StrictWellFormed(all); err != nil {
		t.Fatalf("not well-formed: %v", err)
	}
	// The message's stop reason, sent after the blocks, is on its end.
	if got := providertest.Summarize(t, all); got.StopReason != events.StopToolUse || len(got.Calls) != 2 {
		t.Errorf("stop reason %q and %d calls, want tool_use and 2", got.StopReason, len(got.Calls))
	}
}
