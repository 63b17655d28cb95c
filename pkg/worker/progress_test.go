package worker_test

import (
	"context"
	"testing"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/tool"
	"github.com/llmworker/llmworker/pkg/worker"
)

// A tool's progress reports (tool.ReportProgress) become llmw.tool.progress
// events on the tool channel between the call's start and its result,
// throttled: of a burst, the first and the final report pass.
func TestToolProgressEvents(t *testing.T) {
	type args struct {
		Pages int `json:"pages"`
	}
	var late func()
	scan := tool.Must("scan", "Scans pages.", func(ctx context.Context, a args) (string, error) {
		for i := 1; i <= a.Pages; i++ {
			tool.ReportProgress(ctx, tool.Progress{Progress: float64(i), Total: float64(a.Pages), Message: "scanning"})
		}
		late = func() { tool.ReportProgress(ctx, tool.Progress{Progress: 99, Message: "after the end"}) }
		return "scanned", nil
	})
	p := newScripted(toolStep(call{"c1", "scan", `{"pages":5}`}), textStep("done"))
	rec := &recorder{}
	w := mustNew(t, worker.Config{Provider: p, Model: "test:m", Tools: []tool.Tool{scan}}, worker.WithObserver(rec))
	if res := mustRun(t, w, events.UserText("scan")); res.Status != worker.StatusCompleted {
		t.Fatalf("status %s: %s", res.Status, res.Reason)
	}
	late() // a report racing the end of the call is dropped
	var got []events.ToolProgress
	started, progressAt, resultAt := -1, -1, -1
	for i, ev := range rec.events() {
		switch d := ev.Data.(type) {
		case events.ToolStarted:
			started = i
		case events.ToolProgress:
			if progressAt < 0 {
				progressAt = i
			}
			if ev.Channel() != events.ChannelTool {
				t.Errorf("progress on channel %s", ev.Channel())
			}
			got = append(got, d)
		case events.ToolCallResult:
			resultAt = i
		}
	}
	if len(got) != 2 || got[0].Progress != 1 || got[1].Progress != 5 || got[1].Total != 5 || got[0].CallID != "c1" || got[0].Name != "scan" || got[0].Message != "scanning" {
		t.Fatalf("progress events %+v, want the first and the final of the burst", got)
	}
	if !(started < progressAt && progressAt < resultAt) {
		t.Fatalf("order: started %d, progress %d, result %d", started, progressAt, resultAt)
	}
}
