package poll_test

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llmworker/llmworker/internal/poll"
)

// Until returns once the condition holds, which another goroutine makes
// true; it checks the condition again and again meanwhile.
func TestUntilWaitsForTheCondition(t *testing.T) {
	var checks atomic.Int32
	var done atomic.Bool
	go func() {
		for checks.Load() < 3 {
			time.Sleep(poll.Interval)
		}
		done.Store(true)
	}()
	poll.Until(t, 10*time.Second, "done", func() bool {
		checks.Add(1)
		return done.Load()
	})
	if n := checks.Load(); n < 3 {
		t.Errorf("returned after %d checks, before the condition held", n)
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
