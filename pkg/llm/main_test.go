package llm_test

import (
	"fmt"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/llmworker/llmworker/pkg/events"
)

// Normalize and Scripted streams run goroutines; none may outlive a test.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var callIDRE = regexp.MustCompile(`^call_[0-9a-f]{24}$`)

// show renders events compactly; synthesized tool ids become "call_*" after
// their format is checked.
func show(t *testing.T, evs []events.Event) []string {
	t.Helper()
	var out []string
	for _, ev := range evs {
		var s string
		switch e := ev.(type) {
		case events.StatusEvent:
			s = "status " + string(e.Status)
		case events.ErrorEvent:
			s = "error " + e.Code + ": " + e.Message
		case events.UsageEvent:
			s = "usage"
		case events.PingEvent:
			s = fmt.Sprintf("ping %d", e.Timestamp)
		case events.BlockStart:
			s = fmt.Sprintf("start %d %s", e.Index, e.BlockType)
			if e.BlockType == events.BlockToolUse {
				id := e.ID
				if strings.HasPrefix(id, "call_") {
					if !callIDRE.MatchString(id) {
						t.Errorf("synthesized id %q does not match %s", id, callIDRE)
					}
					id = "call_*"
				}
				s += fmt.Sprintf(" %s %s", id, e.Name)
				if e.Server {
					s += " server"
				}
			}
		case events.BlockDelta:
			s = fmt.Sprintf("delta %d %s %q", e.Index, e.Kind, e.Content)
		case events.BlockStop:
			s = fmt.Sprintf("stop %d %s", e.Index, e.BlockType)
			if e.StopReason != "" {
				s += " " + string(e.StopReason)
			}
			if e.Signature != "" {
				s += " sig=" + e.Signature
			}
		case events.BlockAbort:
			s = fmt.Sprintf("abort %d %s: %s", e.Index, e.BlockType, e.Reason)
		default:
			s = fmt.Sprintf("%#v", ev)
		}
		out = append(out, s)
	}
	return out
}

func wantShown(t *testing.T, got []string, want ...string) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got\n  %s\nwant\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}
