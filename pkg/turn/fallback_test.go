package turn_test

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/ingest"
	"github.com/llmworker/llmworker/pkg/provider"
	"github.com/llmworker/llmworker/pkg/provider/anthropic"
	"github.com/llmworker/llmworker/pkg/provider/gemini"
	"github.com/llmworker/llmworker/pkg/provider/openai"
	"github.com/llmworker/llmworker/pkg/provider/providertest"
	"github.com/llmworker/llmworker/pkg/tool"
	"github.com/llmworker/llmworker/pkg/turn"
	"github.com/llmworker/llmworker/pkg/worker"
)

const (
	claude = "anthropic:claude-haiku-4-5"
	gpt    = "openai:gpt-4o-mini"
	flash  = "gemini:gemini-2.0-flash"
	// overloaded is Anthropic's 529 body.
	overloaded = `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`
	// messageStart opens an Anthropic stream (the Messages API's first event).
	messageStart = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-haiku-4-5\",\"content\":[],\"usage\":{\"input_tokens\":5,\"output_tokens\":1}}}\n\n"
)

// clouds are ingest's real adapters, each pointed at its own stand-in
// server, without the SDKs' own retries.
type clouds struct{ anthropic, openai, gemini *providertest.Server }

func (c clouds) factories() map[string]ingest.Factory {
	url := func(s *providertest.Server) string {
		if s == nil {
			return "http://127.0.0.1:1" // nothing listens: a call fails at once
		}
		return s.URL()
	}
	return provider.Builtin(provider.Config{
		Anthropic: anthropic.Config{APIKey: "test-key", BaseURL: url(c.anthropic), MaxRetries: -1},
		OpenAI:    openai.Config{APIKey: "test-key", BaseURL: url(c.openai), MaxRetries: -1},
		Gemini:    gemini.Config{APIKey: "test-key", BaseURL: url(c.gemini), MaxRetries: -1},
	})
}

// run starts ingest on c's servers and a turn service with cfg on a fresh
// environment, submits req and returns the watcher of its events.
func (c clouds) run(t *testing.T, cfg turn.Config, req events.TurnRequest) *watcher {
	t.Helper()
	e := newEnv(t)
	e.startIngest(c.factories())
	e.startTurn(cfg)
	w := e.watch(req.TurnID)
	e.submit(req)
	return w
}

func steps(t *testing.T, evs []ev) []events.TurnStep {
	var out []events.TurnStep
	for _, e := range evs {
		if e.Type == events.TypeTurnStep {
			out = append(out, decode[events.TurnStep](t, e))
		}
	}
	return out
}

func TestFallbackModels(t *testing.T) {
	gptText := "openai-chat/text-include-usage_gpt-4.1-nano.chunks.jsonl"

	t.Run("a 529 before the first delta: the next model answers the step", func(t *testing.T) {
		wantText, _ := direct(t, providerCase{prefix: "openai", model: "gpt-4o-mini"}, gptText)
		c := clouds{
			anthropic: providertest.NewServer(t, providertest.Status(529, "", overloaded)),
			openai:    providertest.NewServer(t, providertest.SSE(sse(t, gptText))),
		}
		// The service's step retries (two) retry the 529 first.
		w := c.run(t, turn.Config{}, events.TurnRequest{TurnID: newID("fb-529"), Model: claude, FallbackModels: []string{gpt, flash},
			Messages: []events.Message{events.UserText("hi")}, Tools: []string{}})
		done := w.completed()
		if last := done.Messages[len(done.Messages)-1]; last.Text() != wantText {
			t.Fatalf("answer %q, want %q", last.Text(), wantText)
		}
		if n := len(c.anthropic.Requests()); n != 3 {
			t.Fatalf("anthropic got %d requests, want 3 (the call and its 2 step retries)", n)
		}
		if n := len(c.openai.Requests()); n != 1 {
			t.Fatalf("openai got %d requests", n)
		}
		evs := w.events()
		checkSeq(t, evs)
		st := steps(t, evs)
		want := []events.TurnStep{{Step: 1, Attempt: 1, Model: claude}, {Step: 1, Attempt: 2, Model: claude},
			{Step: 1, Attempt: 3, Model: claude}, {Step: 1, Attempt: 4, Model: gpt}}
		if mustJSON(t, st) != mustJSON(t, want) {
			t.Fatalf("llmw.turn.step %+v, want %+v", st, want)
		}
		i := find(evs, events.TypeUsage)
		if i < 0 || decode[events.UsageReport](t, evs[i]).Model != gpt {
			t.Fatalf("usage event: %s", describe(evs))
		}
	})

	// docs/protocol.md §5: a rate limit outlasted the SDK's retries and
	// the provider's Retry-After; the step's short retries would meet it
	// again, so the next model is asked at once.
	t.Run("a 429 before the first delta: the next model at once, no step retry", func(t *testing.T) {
		c := clouds{
			anthropic: providertest.NewServer(t, providertest.Status(http.StatusTooManyRequests, "",
				`{"type":"error","error":{"type":"rate_limit_error","message":"Number of request tokens has exceeded your per-minute rate limit"}}`)),
			openai: providertest.NewServer(t, providertest.SSE(sse(t, gptText))),
		}
		w := c.run(t, turn.Config{}, events.TurnRequest{TurnID: newID("fb-429"), Model: claude, FallbackModels: []string{gpt},
			Messages: []events.Message{events.UserText("hi")}, Tools: []string{}})
		w.completed()
		if a, o := len(c.anthropic.Requests()), len(c.openai.Requests()); a != 1 || o != 1 {
			t.Fatalf("anthropic %d, openai %d requests, want 1 and 1", a, o)
		}
		st := steps(t, w.events())
		want := []events.TurnStep{{Step: 1, Attempt: 1, Model: claude}, {Step: 1, Attempt: 2, Model: gpt}}
		if mustJSON(t, st) != mustJSON(t, want) {
			t.Fatalf("llmw.turn.step %+v, want %+v", st, want)
		}
	})

	t.Run("after the first delta: no fallback, the turn fails, the output once", func(t *testing.T) {
		cut := messageStart +
			"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n" +
			"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Half an ans\"}}\n\n" +
			"event: error\ndata: " + overloaded + "\n\n"
		c := clouds{
			anthropic: providertest.NewServer(t, providertest.SSE([]byte(cut))),
			openai:    providertest.NewServer(t, providertest.SSE(sse(t, gptText))),
		}
		w := c.run(t, turn.Config{StepRetries: -1}, events.TurnRequest{TurnID: newID("fb-delta"), Model: claude, FallbackModels: []string{gpt},
			Messages: []events.Message{events.UserText("hi")}, Tools: []string{}})
		end := w.waitEnd()
		if end.Type != events.TypeTurnFailed || decode[events.TurnEnded](t, end).Code != worker.CodeProviderError {
			t.Fatalf("end %s %s", end.Type, end.Data)
		}
		if n := len(c.openai.Requests()); n != 0 {
			t.Fatalf("openai got %d requests", n)
		}
		evs := w.events()
		var text string
		for _, x := range evs {
			if x.Type == events.TypeBlockDelta {
				text += decode[events.WorkerBlockDelta](t, x).Content
			}
		}
		if text != "Half an ans" || len(steps(t, evs)) != 1 {
			t.Fatalf("deltas %q, steps %+v", text, steps(t, evs))
		}
	})

	t.Run("the warnings are the answering model's", func(t *testing.T) {
		// Anthropic opens the call, so ingest's reply carries its
		// warnings, and fails before the first block; OpenAI answers.
		// Anthropic has no seed and OpenAI's Chat Completions no top_k.
		overloadedStream := messageStart +
			"event: error\ndata: " + overloaded + "\n\n"
		c := clouds{
			anthropic: providertest.NewServer(t, providertest.SSE([]byte(overloadedStream))),
			openai:    providertest.NewServer(t, providertest.SSE(sse(t, gptText))),
		}
		w := c.run(t, turn.Config{StepRetries: -1}, events.TurnRequest{TurnID: newID("fb-warn"), Model: claude, FallbackModels: []string{gpt},
			Messages: []events.Message{events.UserText("hi")}, Tools: []string{},
			ModelOptions: events.ModelOptions{Seed: ptr(int64(7)), TopK: ptr(3)}})
		w.completed()
		if a, o := len(c.anthropic.Requests()), len(c.openai.Requests()); a != 1 || o != 1 {
			t.Fatalf("anthropic %d, openai %d requests", a, o)
		}
		evs := w.events()
		var got []events.TurnWarning
		for _, x := range evs {
			if x.Type == events.TypeTurnWarning {
				got = append(got, decode[events.TurnWarning](t, x))
			}
		}
		if len(got) != 1 || got[0].Step != 1 || got[0].Model != gpt || len(got[0].Warnings) != 1 || got[0].Warnings[0].Setting != "top_k" {
			t.Fatalf("llmw.turn.warning %+v, want one of %s naming top_k only", got, gpt)
		}
		// It comes after the answering call's llmw.turn.step, before its
		// first block.
		at, step, block := find(evs, events.TypeTurnWarning), -1, find(evs, events.TypeBlockStart)
		for i, x := range evs {
			if x.Type == events.TypeTurnStep && decode[events.TurnStep](t, x).Model == gpt {
				step = i
			}
		}
		if step < 0 || step > at || at > block {
			t.Fatalf("warning at %d, the fallback's step at %d, first block at %d:%s", at, step, block, describe(evs))
		}
	})

	t.Run("an invalid request does not fall back", func(t *testing.T) {
		c := clouds{
			anthropic: providertest.NewServer(t, providertest.Status(http.StatusBadRequest, "",
				`{"type":"error","error":{"type":"invalid_request_error","message":"max_tokens: too large"}}`)),
			openai: providertest.NewServer(t, providertest.SSE(sse(t, gptText))),
		}
		w := c.run(t, turn.Config{}, events.TurnRequest{TurnID: newID("fb-400"), Model: claude, FallbackModels: []string{gpt},
			Messages: []events.Message{events.UserText("hi")}, Tools: []string{}})
		end := w.waitEnd()
		if end.Type != events.TypeTurnFailed || decode[events.TurnEnded](t, end).Code != turn.CodeInvalidRequest {
			t.Fatalf("end %s %s", end.Type, end.Data)
		}
		if a, o := len(c.anthropic.Requests()), len(c.openai.Requests()); a != 1 || o != 0 {
			t.Fatalf("anthropic %d, openai %d requests", a, o)
		}
	})

	t.Run("a rate limit falls back; an exhausted list ends with the last model's code", func(t *testing.T) {
		c := clouds{
			anthropic: providertest.NewServer(t, providertest.Status(http.StatusTooManyRequests, "",
				`{"type":"error","error":{"type":"rate_limit_error","message":"Number of request tokens has exceeded your per-minute rate limit"}}`)),
			openai: providertest.NewServer(t, providertest.Status(http.StatusServiceUnavailable, "",
				`{"error":{"message":"The server is overloaded","type":"server_error"}}`)),
		}
		// The service's default list.
		w := c.run(t, turn.Config{StepRetries: -1, FallbackModels: []string{gpt}},
			events.TurnRequest{TurnID: newID("fb-all"), Model: claude, Messages: []events.Message{events.UserText("hi")}, Tools: []string{}})
		end := w.waitEnd()
		if end.Type != events.TypeTurnFailed || decode[events.TurnEnded](t, end).Code != string(ingest.KindUnavailable) {
			t.Fatalf("end %s %s", end.Type, end.Data)
		}
		if a, o := len(c.anthropic.Requests()), len(c.openai.Requests()); a != 1 || o != 1 {
			t.Fatalf("anthropic %d, openai %d requests", a, o)
		}
	})
}

// An Anthropic thinking step (a recording) followed by a step that falls
// back: the fallback model's request carries none of the Anthropic
// thinking or its signature; the session's next turn, on Anthropic
// again, sends both back.
func TestFallbackLeavesOutForeignThinking(t *testing.T) {
	const (
		thinkingFx = "anthropic/thinking-then-tool-use_claude-haiku-4-5.sse"
		signature  = "EoQDCm0IDhgCKkCDzGs2kL2PgnDCZU" // the recording's signature_delta begins so
		thought    = "Let me first call the fixed_version tool"
	)
	for _, to := range []struct{ model, fixture string }{
		{gpt, "openai-chat/text-include-usage_gpt-4.1-nano.chunks.jsonl"},
		{flash, "gemini/text-usage_gemini-2.0-flash-exp.sse"},
	} {
		t.Run(to.model, func(t *testing.T) {
			fallback := providertest.NewServer(t, providertest.SSE(sse(t, to.fixture)))
			c := clouds{
				anthropic: providertest.NewServer(t, providertest.SSE(sse(t, thinkingFx)), providertest.Status(529, "", overloaded),
					providertest.SSE(sse(t, "anthropic/text-ping_claude-sonnet-4-5.sse"))),
				openai: fallback, gemini: fallback,
			}
			e := newEnv(t)
			e.startIngest(c.factories())
			version := tool.Must("fixed_version", "the version", func(context.Context, struct{}) (string, error) { return "1.2.3", nil })
			e.startTurn(turn.Config{StepRetries: -1, Tools: []tool.Tool{version}})

			session := newID("fb-sess")
			id := newID("fb-think")
			w := e.watch(id)
			e.submit(events.TurnRequest{TurnID: id, SessionID: session, Model: claude, FallbackModels: []string{to.model},
				Messages: []events.Message{events.UserText("which version?")}, Tools: []string{"fixed_version"}})
			done := w.completed()
			var thinking *events.Part
			for _, m := range done.Messages {
				for i, p := range m.Content {
					if p.Type == events.PartThinking {
						thinking = &m.Content[i]
					}
				}
			}
			if thinking == nil || thinking.Origin != "anthropic" || !strings.HasPrefix(thinking.Signature, signature) {
				t.Fatalf("transcript's thinking part %+v", thinking)
			}
			reqs := fallback.Requests()
			if len(reqs) != 1 {
				t.Fatalf("the fallback got %d requests", len(reqs))
			}
			body := reqs[0].Body
			if !bytes.Contains(body, []byte("1.2.3")) {
				t.Fatalf("the fallback's request lacks the tool result: %s", body)
			}
			if bytes.Contains(body, []byte(signature)) || bytes.Contains(body, []byte(thought)) {
				t.Fatalf("the fallback's request carries Anthropic's thinking: %s", body)
			}

			// The next turn of the session goes to Anthropic, which reads
			// its own thinking.
			id2 := newID("fb-back")
			w2 := e.watch(id2)
			e.submit(events.TurnRequest{TurnID: id2, SessionID: session, Model: claude,
				Messages: []events.Message{events.UserText("thanks")}, Tools: []string{}})
			w2.completed()
			areqs := c.anthropic.Requests()
			last := areqs[len(areqs)-1].Body
			if !bytes.Contains(last, []byte(signature)) || !bytes.Contains(last, []byte(thought)) {
				t.Fatalf("anthropic's request lacks its thinking: %s", last)
			}
		})
	}
}
