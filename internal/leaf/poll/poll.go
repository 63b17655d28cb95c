// Package poll is the polling helper of llmworker's tests: it waits for a
// condition that becomes true asynchronously, checking it every few
// milliseconds, instead of sleeping for a fixed time. It imports nothing
// but the standard library, so that a package's tests can wait without
// linking a NATS server (pkg/natstest.Eventually is this, for the tests
// that run one).
package poll

import (
	"testing"
	"time"
)

// Interval is how often Until checks its condition.
const Interval = 2 * time.Millisecond

// Until checks cond every Interval until it holds, and fails t with
// "timed out after <limit> waiting for <what>" when it does not within
// limit.
func Until(t testing.TB, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", limit, what)
		}
		time.Sleep(Interval)
	}
}
