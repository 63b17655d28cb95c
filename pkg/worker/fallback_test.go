package worker_test

import (
	"context"
	"errors"
	"net/http"
	"reflect"
	"slices"
	"sync"
	"testing"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/llm"
	"github.com/llmworker/llmworker/pkg/tool"
	"github.com/llmworker/llmworker/pkg/worker"
)

// byModel plays, for each model, its scripts in order and records which
// model each call asked.
type byModel struct {
	mu      sync.Mutex
	scripts map[string][]script
	models  []string
	reqs    []llm.Request
}

func (p *byModel) Stream(ctx context.Context, req *llm.Request) (llm.Stream, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.models = append(p.models, req.Model)
	p.reqs = append(p.reqs, *req)
	s := p.scripts[req.Model]
	if len(s) == 0 {
		return nil, errors.New("byModel: no script for " + req.Model)
	}
	sc := s[0]
	p.scripts[req.Model] = s[1:]
	if sc.err != nil {
		return nil, sc.err
	}
	return &sliceStream{ctx: ctx, evs: sc.evs, closed: make(chan struct{})}, nil
}

func (p *byModel) calls() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.models)
}

func status(code int) script {
	return script{err: llm.NewAPIError(code, errors.New(http.StatusText(code)))}
}

const primary, second, third = "anthropic:claude", "openai:gpt", "gemini:flash"

func TestFallback(t *testing.T) {
	t.Run("a call refused before its first delta goes on with the next model", func(t *testing.T) {
		rec := &recorder{}
		p := &byModel{scripts: map[string][]script{
			primary: {status(529), status(529)},
			second:  {{evs: stream(textBlock(0, events.StopEndTurn, "from gpt"), []events.Event{usage(3, 2)})}},
		}}
		w := mustNew(t, worker.Config{Provider: p, Model: primary, FallbackModels: []string{second, third},
			StepAttempts: 2, Observer: rec, TurnID: "t"})
		res := mustRun(t, w, events.UserText("go"))
		if res.Status != worker.StatusCompleted || res.Text() != "from gpt" {
			t.Fatalf("result %+v", res)
		}
		if got := p.calls(); !slices.Equal(got, []string{primary, primary, second}) {
			t.Fatalf("calls %v", got)
		}
		var steps []events.TurnStep
		for _, d := range rec.ofType(events.TypeTurnStep) {
			steps = append(steps, d.(events.TurnStep))
		}
		want := []events.TurnStep{{Step: 1, Attempt: 1, Model: primary}, {Step: 1, Attempt: 2, Model: primary}, {Step: 1, Attempt: 3, Model: second}}
		if !slices.Equal(steps, want) {
			t.Fatalf("turn.step %+v, want %+v", steps, want)
		}
		if u := rec.ofType(events.TypeUsage); len(u) != 1 || u[0].(events.UsageReport).Model != second {
			t.Fatalf("usage %+v", u)
		}
		if ids := requestIDs(p); len(ids) != 3 || ids[0] == ids[1] || ids[1] == ids[2] {
			t.Fatalf("request ids %v", ids)
		}
	})

	t.Run("later steps stay on the model that answered, also from a checkpoint", func(t *testing.T) {
		p := &byModel{scripts: map[string][]script{
			primary: {status(429)},
			second:  {toolStep(call{"c1", "echo", `{"s":"x"}`}), textStep("done")},
		}}
		var cps []*worker.Checkpoint
		w := mustNew(t, worker.Config{Provider: p, Model: primary, FallbackModels: []string{second}, Tools: echoTools(),
			Checkpoint: func(_ context.Context, cp *worker.Checkpoint) error { cps = append(cps, cp); return nil }})
		res := mustRun(t, w, events.UserText("go"))
		if res.Status != worker.StatusCompleted || res.Text() != "done" {
			t.Fatalf("result %+v", res)
		}
		if got := p.calls(); !slices.Equal(got, []string{primary, second, second}) {
			t.Fatalf("calls %v", got)
		}
		last := cps[len(cps)-1]
		if last.Model != second {
			t.Fatalf("checkpoint model %q", last.Model)
		}
		// Another process continues the checkpoint before step 2: it asks
		// the fallback model first.
		var before *worker.Checkpoint
		for _, cp := range cps {
			if cp.Phase == worker.PhaseModel && cp.Step == 1 {
				before = cp
			}
		}
		if before == nil || before.Model != second {
			t.Fatalf("no checkpoint before step 2 with the fallback model: %+v", before)
		}
		p2 := &byModel{scripts: map[string][]script{second: {textStep("again")}}}
		w2 := mustNew(t, worker.Config{Provider: p2, Model: primary, FallbackModels: []string{second}, Tools: echoTools()})
		res, err := w2.RunFrom(context.Background(), before)
		if err != nil || res.Status != worker.StatusCompleted || !slices.Equal(p2.calls(), []string{second}) {
			t.Fatalf("RunFrom: %+v %v, calls %v", res, err, p2.calls())
		}
	})

	t.Run("no fallback after the first delta", func(t *testing.T) {
		rec := &recorder{}
		p := &byModel{scripts: map[string][]script{
			primary: {{evs: []events.Event{started(), events.BlockStart{Index: 0, BlockType: events.BlockText},
				events.TextDelta(0, "half an ans"), events.ErrorEvent{Code: "overloaded_error", Message: "Overloaded"},
				events.StatusEvent{Status: events.StatusFailed}}}},
			second: {textStep("never")},
		}}
		w := mustNew(t, worker.Config{Provider: p, Model: primary, FallbackModels: []string{second}, Observer: rec})
		res := mustRun(t, w, events.UserText("go"))
		if res.Status != worker.StatusFailed || res.Code != worker.CodeProviderError {
			t.Fatalf("result %+v", res)
		}
		if got := p.calls(); !slices.Equal(got, []string{primary}) {
			t.Fatalf("calls %v", got)
		}
		var text string
		for _, d := range rec.ofType(events.TypeBlockDelta) {
			text += d.(events.WorkerBlockDelta).Content
		}
		if text != "half an ans" {
			t.Fatalf("deltas %q", text)
		}
	})

	t.Run("a request the provider refuses as invalid does not fall back", func(t *testing.T) {
		p := &byModel{scripts: map[string][]script{primary: {status(400)}, second: {textStep("never")}}}
		w := mustNew(t, worker.Config{Provider: p, Model: primary, FallbackModels: []string{second}})
		res := mustRun(t, w, events.UserText("go"))
		if res.Status != worker.StatusFailed || res.Code != string(llm.KindInvalidRequest) || !slices.Equal(p.calls(), []string{primary}) {
			t.Fatalf("result %+v, calls %v", res, p.calls())
		}
	})

	t.Run("an exhausted list ends with the last model's failure", func(t *testing.T) {
		p := &byModel{scripts: map[string][]script{primary: {status(529)}, second: {status(503)}, third: {status(429)}}}
		w := mustNew(t, worker.Config{Provider: p, Model: primary, FallbackModels: []string{second, third}})
		res := mustRun(t, w, events.UserText("go"))
		if res.Status != worker.StatusFailed || res.Code != string(llm.KindRateLimited) || !slices.Equal(p.calls(), []string{primary, second, third}) {
			t.Fatalf("result %+v, calls %v", res, p.calls())
		}
	})

	t.Run("Fallback decides", func(t *testing.T) {
		var seen []worker.StepFailure
		p := &byModel{scripts: map[string][]script{primary: {status(529)}, second: {textStep("never")}}}
		w := mustNew(t, worker.Config{Provider: p, Model: primary, FallbackModels: []string{second},
			Fallback: func(f worker.StepFailure) bool { seen = append(seen, f); return false }})
		res := mustRun(t, w, events.UserText("go"))
		if res.Status != worker.StatusFailed || res.Code != string(llm.KindUnavailable) || len(seen) != 1 ||
			seen[0].Model != primary || seen[0].Attempt != 1 || seen[0].Err == nil || seen[0].Output {
			t.Fatalf("result %+v, Fallback saw %+v", res, seen)
		}
	})

	t.Run("invalid lists", func(t *testing.T) {
		for _, fb := range [][]string{{"gpt"}, {primary}, {second, second}} {
			if _, err := worker.New(worker.Config{Provider: &byModel{}, Model: primary, FallbackModels: fb}); !errors.Is(err, worker.ErrInvalidConfig) {
				t.Errorf("%v: %v", fb, err)
			}
		}
	})
}

// The parts only their provider reads carry its name (its origin).
func TestPartOrigin(t *testing.T) {
	sig := func(idx int, text, s string) []events.Event {
		return []events.Event{events.BlockStart{Index: idx, BlockType: events.BlockText}, events.TextDelta(idx, text),
			events.BlockStop{Index: idx, BlockType: events.BlockText, StopReason: events.StopEndTurn, Signature: s}}
	}
	p := &byModel{scripts: map[string][]script{primary: {{evs: stream(thinkingBlock(0, "hm", "sig-a"), sig(1, "plain", ""), sig(2, "signed", "sig-b"))}}}}
	res := mustRun(t, mustNew(t, worker.Config{Provider: p, Model: primary}), events.UserText("go"))
	got := res.Messages[len(res.Messages)-1].Content
	want := []events.Part{
		{Type: events.PartThinking, Thinking: "hm", Signature: "sig-a", Origin: "anthropic"},
		{Type: events.PartText, Text: "plain"},
		{Type: events.PartText, Text: "signed", Signature: "sig-b", Origin: "anthropic"},
	}
	if jsonString(t, got) != jsonString(t, want) {
		t.Fatalf("parts %s, want %s", jsonString(t, got), jsonString(t, want))
	}

	// Claude on Vertex AI makes signatures the Claude API reads: its
	// parts carry the origin anthropic.
	const vertexClaude = "vertex-anthropic:claude"
	p = &byModel{scripts: map[string][]script{vertexClaude: {{evs: stream(thinkingBlock(0, "hm", "sig-a"), sig(1, "plain", ""), sig(2, "signed", "sig-b"))}}}}
	res = mustRun(t, mustNew(t, worker.Config{Provider: p, Model: vertexClaude}), events.UserText("go"))
	if got := res.Messages[len(res.Messages)-1].Content; jsonString(t, got) != jsonString(t, want) {
		t.Fatalf("parts of %s %s, want %s", vertexClaude, jsonString(t, got), jsonString(t, want))
	}
}

func echoTools() []tool.Tool {
	return []tool.Tool{tool.Must("echo", "echoes s", func(_ context.Context, a struct {
		S string `json:"s"`
	}) (string, error) {
		return a.S, nil
	})}
}

func requestIDs(p *byModel) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var ids []string
	for _, r := range p.reqs {
		ids = append(ids, r.RequestID)
	}
	return ids
}

// warnsByModel is a provider whose streams report, per model, the
// settings that were not sent.
type warnsByModel struct {
	llm.Provider
	warnings map[string][]events.Warning
}

func (p warnsByModel) Stream(ctx context.Context, req *llm.Request) (llm.Stream, error) {
	s, err := p.Provider.Stream(ctx, req)
	if err != nil {
		return nil, err
	}
	return warnStream{s, p.warnings[req.Model]}, nil
}

func TestFallbackWarnings(t *testing.T) {
	seed := []events.Warning{{Setting: "seed", Message: "anthropic has no seed; not sent"}}
	topK := []events.Warning{{Setting: "top_k", Message: "openai has no top_k; not sent"}}
	// overloaded opens and fails before its first block.
	overloaded := script{evs: []events.Event{started(), events.ErrorEvent{Code: "overloaded_error", Message: "Overloaded"},
		events.StatusEvent{Status: events.StatusFailed}}}

	t.Run("the step's warning is the answering model's", func(t *testing.T) {
		rec := &recorder{}
		p := &byModel{scripts: map[string][]script{primary: {overloaded}, second: {textStep("from gpt")}}}
		w := mustNew(t, worker.Config{Provider: warnsByModel{p, map[string][]events.Warning{primary: seed, second: topK}},
			Model: primary, FallbackModels: []string{second}, Observer: rec})
		if res := mustRun(t, w, events.UserText("go")); res.Status != worker.StatusCompleted {
			t.Fatalf("result %+v", res)
		}
		want := []any{events.TurnWarning{Step: 1, Model: second, Warnings: topK}}
		if got := rec.ofType(events.TypeTurnWarning); !reflect.DeepEqual(got, want) {
			t.Fatalf("warnings %+v, want %+v", got, want)
		}
		// After the answering call's llmw.turn.step, before its block.
		types := rec.types()
		i := slices.Index(types, "turn.warning")
		if i < 1 || types[i-1] != "turn.step" || types[i+1] != "block.start/text" {
			t.Fatalf("events %v", types)
		}
	})

	t.Run("a call without blocks warns at its completion", func(t *testing.T) {
		rec := &recorder{}
		p := &byModel{scripts: map[string][]script{primary: {overloaded}, second: {{evs: stream()}}}}
		w := mustNew(t, worker.Config{Provider: warnsByModel{p, map[string][]events.Warning{primary: seed, second: topK}},
			Model: primary, FallbackModels: []string{second}, Observer: rec})
		mustRun(t, w, events.UserText("go"))
		want := []any{events.TurnWarning{Step: 1, Model: second, Warnings: topK}}
		if got := rec.ofType(events.TypeTurnWarning); !reflect.DeepEqual(got, want) {
			t.Fatalf("warnings %+v, want %+v", got, want)
		}
	})

	t.Run("a step no call answered has none", func(t *testing.T) {
		rec := &recorder{}
		p := &byModel{scripts: map[string][]script{primary: {overloaded}}}
		w := mustNew(t, worker.Config{Provider: warnsByModel{p, map[string][]events.Warning{primary: seed}},
			Model: primary, Observer: rec})
		if res := mustRun(t, w, events.UserText("go")); res.Status != worker.StatusFailed {
			t.Fatalf("result %+v", res)
		}
		if got := rec.ofType(events.TypeTurnWarning); len(got) != 0 {
			t.Fatalf("warnings %+v of a call that failed before its first block", got)
		}
	})
}
