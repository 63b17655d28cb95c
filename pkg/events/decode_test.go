package events_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/llmworker/llmworker/pkg/events"
)

// A body nested deeper than MaxDepth is refused with an error naming the
// limit, before encoding/json builds it; nesting inside strings does not
// count, and MaxDepth levels are fine.
func TestDecodeRefusesDeepNesting(t *testing.T) {
	deep := strings.Repeat("[", events.MaxDepth+1) + strings.Repeat("]", events.MaxDepth+1)
	body := `{"turn_id":"t","model":"x:y","messages":[{"role":"user","content":"hi"}],"metadata":{"x":` + deep + `}}`
	_, err := events.Decode[events.TurnRequest]([]byte(body))
	if !errors.Is(err, events.ErrInvalid) || !strings.Contains(err.Error(), fmt.Sprint(events.MaxDepth)) {
		t.Fatalf("err = %v, want ErrInvalid naming the limit %d", err, events.MaxDepth)
	}
	ok := strings.Repeat("[", events.MaxDepth-2) + strings.Repeat("]", events.MaxDepth-2)
	inString := `"` + strings.Repeat("[{", 500) + `\"` + `"`
	for _, b := range []string{`{"a":` + ok + `}`, `{"a":` + inString + `}`} {
		var v map[string]any
		if err := events.Unmarshal([]byte(b), &v); err != nil {
			t.Errorf("%.40s…: %v", b, err)
		}
	}
}

// "messages": [] is a turn's input only with a session, whose transcript
// then is the input (docs/protocol.md §5, "The turn request").
func TestTurnRequestEmptyMessagesNeedsASession(t *testing.T) {
	_, err := events.Decode[events.TurnRequest]([]byte(`{"turn_id":"t","model":"x:y","messages":[]}`))
	var fe *events.FieldError
	if !errors.As(err, &fe) || fe.Field != "messages" {
		t.Fatalf("err = %v, want a FieldError naming messages", err)
	}
	if _, err := events.Decode[events.TurnRequest]([]byte(`{"turn_id":"t","session_id":"s","model":"x:y","messages":[]}`)); err != nil {
		t.Fatalf("with a session: %v", err)
	}
}
