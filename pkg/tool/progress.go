package tool

import (
	"context"
	"sync"
	"time"
)

// Progress is one progress report of a running tool call, as MCP's
// notifications/progress carries it: Progress grows with every report;
// Total, when known, is what it reaches at the end.
type Progress struct {
	Progress float64
	Total    float64
	Message  string
}

// ProgressFunc receives a call's progress reports.
type ProgressFunc func(Progress)

type progressKey struct{}

// WithProgress returns ctx carrying f: ReportProgress under ctx calls it.
// The worker sets it for every tool execution (the reports become
// llmw.tool.progress events), and toolexec for every call it runs (the
// reports travel to the turn waiting for the call).
func WithProgress(ctx context.Context, f ProgressFunc) context.Context {
	return context.WithValue(ctx, progressKey{}, f)
}

// ReportProgress reports the progress of the tool call running under ctx.
// It does nothing when nobody listens; it does not block on the listener's
// I/O beyond what the listener does.
func ReportProgress(ctx context.Context, p Progress) {
	if f, ok := ctx.Value(progressKey{}).(ProgressFunc); ok && f != nil {
		f(p)
	}
}

// ProgressFrom returns the progress listener of ctx (nil when none).
func ProgressFrom(ctx context.Context) ProgressFunc {
	f, _ := ctx.Value(progressKey{}).(ProgressFunc)
	return f
}

// DefaultProgressEvery is the least time between two progress reports
// that Throttle passes on.
const DefaultProgressEvery = 200 * time.Millisecond

// Throttle passes on at most one report per every (0 =
// DefaultProgressEvery), so that a chatty tool cannot flood the UI
// subjects: a report that comes sooner is dropped unless it is the final
// one (Total set and reached). The returned stop makes it drop everything
// after (a report that races the call's end must not follow its result).
func Throttle(f ProgressFunc, every time.Duration) (_ ProgressFunc, stop func()) {
	t := &Throttler{Every: every}
	return func(p Progress) { t.Report(p, f) }, t.Stop
}

// Throttler applies Throttle's rule to the reports passed to it, for a
// caller that keeps one per call inside a struct of its own rather than
// the closures Throttle allocates (the worker, once per tool call). The
// zero value passes on at most one report per DefaultProgressEvery.
type Throttler struct {
	// Every is the least time between two reports passed on (0 =
	// DefaultProgressEvery). Set it before the first Report.
	Every   time.Duration
	mu      sync.Mutex
	last    time.Time
	stopped bool
}

// Report calls f with p unless the rule drops p or Stop was called. f runs
// under the Throttler's lock, so that Stop returns only after a report in
// flight was passed on.
func (t *Throttler) Report(p Progress, f ProgressFunc) {
	every := t.Every
	if every <= 0 {
		every = DefaultProgressEvery
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	final := p.Total > 0 && p.Progress >= p.Total
	if t.stopped || (!final && !t.last.IsZero() && time.Since(t.last) < every) {
		return
	}
	t.last = time.Now()
	f(p)
}

// Stop makes the Throttler drop every report after it (a report that
// races the call's end must not follow its result).
func (t *Throttler) Stop() {
	t.mu.Lock()
	t.stopped = true
	t.mu.Unlock()
}
