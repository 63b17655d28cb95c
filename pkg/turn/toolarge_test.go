package turn_test

import (
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/llm/llmtest"
	"github.com/llmworker/llmworker/pkg/turn"
)

// A checkpoint may take the NATS max payload less 1024 bytes (the
// message's headers). One between that limit and the max payload fails
// the turn with too_large, and the reason quotes the limit the checkpoint
// exceeded, not the max payload, which it does not exceed.
func TestTooLargeReasonQuotesTheLimitExceeded(t *testing.T) {
	e := newEnv(t)
	maxPayload := e.nc.MaxPayload()
	limit := maxPayload - 1024
	p := llmtest.NewScripted()
	p.SetFallback(llmtest.TextStep("ok"))
	e.scripted(p)
	e.startTurn(turn.Config{})
	size := regexp.MustCompile(`is (\d+) bytes`)
	// The first checkpoint holds the user's text once (the state's request
	// goes without its messages): each turn's is 256 bytes larger than the
	// one before, so the first that fails is at most 256 bytes over the
	// limit, and its request still fits into a message.
	for n := int(limit) - 1024; n < int(maxPayload); n += 256 {
		id := newID("near-limit")
		w := e.watch(id)
		e.submit(events.TurnRequest{TurnID: id, Model: "test:m", Messages: []events.Message{events.UserText(strings.Repeat("x", n))}})
		end := w.waitEnd()
		if end.Type == events.TypeTurnCompleted {
			continue
		}
		te := decode[events.TurnEnded](t, end)
		if end.Type != events.TypeTurnFailed || te.Code != turn.CodeTooLarge {
			t.Fatalf("%s %+v", end.Type, te)
		}
		m := size.FindStringSubmatch(te.Reason)
		if m == nil {
			t.Fatalf("the reason quotes no size: %q", te.Reason)
		}
		got, _ := strconv.ParseInt(m[1], 10, 64)
		if got <= limit || got > maxPayload {
			t.Fatalf("a checkpoint of %d bytes failed; want one between %d and %d bytes: %q", got, limit, maxPayload, te.Reason)
		}
		if !strings.Contains(te.Reason, strconv.FormatInt(limit, 10)) {
			t.Fatalf("the reason does not quote the %d bytes that the checkpoint of %d bytes exceeded: %q", limit, got, te.Reason)
		}
		return
	}
	t.Fatal("no turn failed with too_large")
}
