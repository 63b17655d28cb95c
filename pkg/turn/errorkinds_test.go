package turn_test

import (
	"testing"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/ingest"
	"github.com/llmworker/llmworker/pkg/llm"
	"github.com/llmworker/llmworker/pkg/llm/llmtest"
	"github.com/llmworker/llmworker/pkg/turn"
)

// The kind of a failed model call reaches the client as the code of
// llmw.turn.failed (docs/protocol.md §10), so that a program can tell a
// missing key from an unknown model or a refusal, each with a code of
// its own.
func TestFailedCallKeepsItsKind(t *testing.T) {
	e := newEnv(t)
	refusal := llmtest.Script{Events: []events.Event{
		events.StatusEvent{Status: events.StatusStarted},
		events.ErrorEvent{Code: "refusal", Message: "I can't help with that."},
		events.StatusEvent{Status: events.StatusFailed},
	}}
	e.startIngest(map[string]ingest.Factory{
		"nokey": func(string) (llm.Provider, error) {
			return nil, llm.NewAPIError(0, ingest.ErrMissingAPIKey)
		},
		"test": ingest.Static(llmtest.NewScripted(refusal)),
	})
	e.startTurn(turn.Config{})
	for _, tc := range []struct{ model, code string }{
		{"nokey:m", "missing_api_key"},
		{"nosuch:m", "unknown_provider"},
		{"test:m", "refusal"},
	} {
		id := newID("kind")
		w := e.watch(id)
		e.submit(events.TurnRequest{TurnID: id, Model: tc.model, Messages: []events.Message{events.UserText("hi")}})
		end := w.waitEnd()
		if te := decode[events.TurnEnded](t, end); end.Type != events.TypeTurnFailed || te.Code != tc.code {
			t.Errorf("%s: %s %+v, want code %s", tc.model, end.Type, te, tc.code)
		}
	}
}
