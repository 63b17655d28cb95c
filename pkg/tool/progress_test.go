package tool

import (
	"context"
	"testing"
	"time"
)

type ctxKey struct{}

type reportLog []Progress

func (l *reportLog) ReportProgress(p Progress) { *l = append(*l, p) }

// A CallContext answers CallFrom and ProgressFrom like WithCall and
// WithProgress together, and passes every other key and the cancellation
// of its parent through.
func TestCallContext(t *testing.T) {
	parent, cancel := context.WithCancel(context.WithValue(context.Background(), ctxKey{}, "outer"))
	info := CallInfo{TurnID: "t1", SessionID: "s1", CallID: "c1", Name: "echo", Step: 3}
	var got reportLog
	var cc CallContext
	cc.Set(parent, info, &got)
	var ctx context.Context = &cc

	if c, ok := CallFrom(ctx); !ok || c != info {
		t.Errorf("CallFrom = %+v, %v; want %+v", c, ok, info)
	}
	ReportProgress(ctx, Progress{Progress: 1, Total: 2, Message: "half"})
	if len(got) != 1 || got[0] != (Progress{Progress: 1, Total: 2, Message: "half"}) {
		t.Errorf("reports = %+v", got)
	}
	if ProgressFrom(ctx) == nil {
		t.Error("ProgressFrom = nil")
	}
	if v := ctx.Value(ctxKey{}); v != "outer" {
		t.Errorf("parent value = %v", v)
	}
	// A context derived from it is cancelled with the parent.
	child, stop := context.WithTimeout(ctx, time.Hour)
	defer stop()
	cancel()
	select {
	case <-child.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("a child context was not cancelled with the parent")
	}
	// An inner WithCall overrides it, as nested WithValue contexts do.
	other := CallInfo{CallID: "c2"}
	if c, _ := CallFrom(WithCall(ctx, other)); c != other {
		t.Errorf("inner WithCall: CallFrom = %+v", c)
	}
	if _, ok := CallFrom(context.Background()); ok {
		t.Error("CallFrom of a bare context reports a call")
	}

	// Without a reporter, progress goes to the parent's listener.
	var outer []Progress
	var bare CallContext
	bare.Set(WithProgress(context.Background(), func(p Progress) { outer = append(outer, p) }), info, nil)
	ReportProgress(&bare, Progress{Progress: 7})
	if len(outer) != 1 || outer[0].Progress != 7 {
		t.Errorf("parent listener got %+v", outer)
	}
}

// Throttler passes on the first report, drops those that come sooner than
// Every after the last one passed on unless final (Total reached), and
// everything after Stop.
func TestThrottler(t *testing.T) {
	var got []float64
	f := func(p Progress) { got = append(got, p.Progress) }
	th := Throttler{Every: time.Hour}
	th.Report(Progress{Progress: 1}, f)           // first: passed
	th.Report(Progress{Progress: 2}, f)           // too soon: dropped
	th.Report(Progress{Progress: 3, Total: 5}, f) // too soon, not final: dropped
	th.Report(Progress{Progress: 5, Total: 5}, f) // final: passed
	th.Stop()
	th.Report(Progress{Progress: 6, Total: 6}, f) // after Stop: dropped
	if want := []float64{1, 5}; !equalFloats(got, want) {
		t.Errorf("passed %v, want %v", got, want)
	}

	got = nil
	var zero Throttler // Every 0: DefaultProgressEvery
	zero.Report(Progress{Progress: 1}, f)
	zero.Report(Progress{Progress: 2}, f)
	if want := []float64{1}; !equalFloats(got, want) {
		t.Errorf("zero Throttler passed %v, want %v", got, want)
	}

	got = nil
	fast := Throttler{Every: time.Nanosecond}
	fast.Report(Progress{Progress: 1}, f)
	time.Sleep(time.Millisecond) // Every passes: the time between the reports is what is tested
	fast.Report(Progress{Progress: 2}, f)
	if want := []float64{1, 2}; !equalFloats(got, want) {
		t.Errorf("after Every passed: %v, want %v", got, want)
	}

	// Throttle is the same rule behind a ProgressFunc.
	got = nil
	report, stop := Throttle(f, time.Hour)
	report(Progress{Progress: 1})
	report(Progress{Progress: 2})
	stop()
	report(Progress{Progress: 3, Total: 3})
	if want := []float64{1}; !equalFloats(got, want) {
		t.Errorf("Throttle passed %v, want %v", got, want)
	}
}

func equalFloats(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
