package worker_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/llmworker/llmworker/pkg/compact"
	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/llm"
	"github.com/llmworker/llmworker/pkg/worker"
)

// With provider-native compaction on, a model whose provider compacts
// natively is asked to compact at the threshold of the tiers (0.8 of the
// room, 22118 tokens on the 32k model) and the tiers leave its context
// alone; a model of another provider, or native compaction off, gets the
// tiers.
func TestNativeCompactionInsteadOfTiers(t *testing.T) {
	on, off := true, false
	for _, tc := range []struct {
		name    string
		model   string
		native  *bool
		trigger int64 // 0: no compaction asked of the provider
		tiers   bool
	}{
		{"native on a provider that has it", "anthropic:claude", &on, 22118, false},
		{"native on a provider without it", "test:m32k", &on, 0, true},
		{"native off", "anthropic:claude", &off, 0, true},
		{"native unset", "openai-responses:gpt", nil, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var (
				mu   sync.Mutex
				reqs []llm.Request
			)
			p := providerFunc(func(req *llm.Request) script {
				if req.System == compact.SummarySystem {
					return textStep("summary")
				}
				mu.Lock()
				reqs = append(reqs, *req)
				mu.Unlock()
				return textStep("ok")
			})
			rec := &recorder{}
			w := mustNew(t, worker.Config{Provider: p, Model: tc.model, ModelLimits: limits32k, Observer: rec,
				Compaction: events.CompactionConfig{Native: tc.native}})
			msgs := []events.Message{events.UserText(text40k('a')), events.AssistantText("ok"), events.UserText(text40k('b')), events.AssistantText("ok"), events.UserText(text40k('c'))}
			if res := mustRun(t, w, msgs...); res.Status != worker.StatusCompleted {
				t.Fatalf("status %s: %s", res.Status, res.Reason)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(reqs) != 1 {
				t.Fatalf("%d model calls, want 1", len(reqs))
			}
			var trigger int64
			if c := reqs[0].Compaction; c != nil {
				trigger = c.Trigger
			}
			if trigger != tc.trigger || (tc.trigger == 0) != (reqs[0].Compaction == nil) {
				t.Errorf("compaction asked of the provider %+v, want trigger %d", reqs[0].Compaction, tc.trigger)
			}
			if got := len(compactions(rec)) > 0; got != tc.tiers {
				t.Errorf("compacted by the tiers: %v, want %v", got, tc.tiers)
			}
			if !tc.tiers && len(reqs[0].Messages) != len(msgs) {
				t.Errorf("the provider read %d messages, want the %d originals", len(reqs[0].Messages), len(msgs))
			}
		})
	}
}

// The on_message_send hooks' context reaches the model while a
// provider-native compaction is active and the model is of its origin;
// a model of another origin (a fallback) reads its own projection.
func TestNativeCompactionKeepsHookEdits(t *testing.T) {
	chain := chainWith(t, func(c *chainT) {
		c.send("note", func(_ context.Context, in *sendIn) (sendOut, error) {
			in.Messages = append(in.Messages, events.UserText("[note]"))
			return sendOut{}, nil
		})
	})
	block := events.Part{Type: events.PartThinking, Origin: "anthropic", Redacted: true, Signature: llm.NativeCompactionSignature(`{"type":"compaction"}`)}
	msgs := []events.Message{events.UserText("first"), {Role: events.RoleAssistant, Content: []events.Part{block, events.TextPart("answer")}}, events.UserText("second")}
	cp := &worker.Checkpoint{Version: worker.CheckpointVersion, TurnID: "t1", Phase: worker.PhaseModel, Messages: msgs,
		Compaction: &events.Compaction{ID: "t1.c1", To: 1, Messages: []events.Message{}, Policy: "native:anthropic", Turn: "t1"}}
	var got []llm.Request
	p := providerFunc(func(req *llm.Request) script {
		got = append(got, *req)
		if strings.HasPrefix(req.Model, "anthropic:") {
			return script{evs: []events.Event{started(), events.ErrorEvent{Code: "overloaded_error", Message: "busy"}, events.StatusEvent{Status: events.StatusFailed}}}
		}
		return textStep("from openai")
	})
	w := mustNew(t, worker.Config{Provider: p, Model: "anthropic:claude", FallbackModels: []string{"openai:gpt"}, Hooks: chain})
	res, err := w.RunFrom(context.Background(), cp)
	if err != nil || res.Status != worker.StatusCompleted {
		t.Fatalf("RunFrom: %v %+v", err, res)
	}
	if len(got) != 2 {
		t.Fatalf("%d model calls, want 2", len(got))
	}
	if m := got[0].Messages; len(m) != 3 || m[2].Text() != "[note]" || m[0].Text() != "answer" {
		t.Errorf("anthropic read %s, want the projection from the compaction and the hook's note", jsonString(t, m))
	}
	if m := got[1].Messages; len(m) != 3 || m[0].Text() != "first" || len(m[1].Content) != 1 {
		t.Errorf("openai read %s, want the originals without the block", jsonString(t, m))
	}
}
