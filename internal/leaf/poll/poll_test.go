package poll_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/llmworker/llmworker/internal/leaf/poll"
)

// Until checks the condition again and again, and returns once it holds.
func TestUntilWaitsForTheCondition(t *testing.T) {
	checks := 0
	poll.Until(t, 10*time.Second, "the third check", func() bool {
		checks++
		return checks == 3
	})
	if checks != 3 {
		t.Errorf("returned after %d checks, want 3", checks)
	}
}

// recorder is a testing.TB that records Fatalf instead of stopping.
type recorder struct {
	testing.TB
	msg string
}

func (r *recorder) Helper() {}
func (r *recorder) Fatalf(format string, args ...any) {
	r.msg = fmt.Sprintf(format, args...)
}

// A condition that never holds fails the test after the limit, naming
// what was awaited.
func TestUntilFailsAfterTheLimit(t *testing.T) {
	r := &recorder{TB: t}
	start := time.Now()
	poll.Until(r, 20*time.Millisecond, "nothing", func() bool {
		// Fatalf records instead of stopping: hold once it was called.
		return r.msg != ""
	})
	if !strings.Contains(r.msg, "waiting for nothing") || time.Since(start) < 20*time.Millisecond {
		t.Errorf("failure %q after %v", r.msg, time.Since(start))
	}
}
