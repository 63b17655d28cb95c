package turn_test

import (
	"context"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llmworker/llmworker/pkg/agents"
	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/llm"
	"github.com/llmworker/llmworker/pkg/llm/llmtest"
	"github.com/llmworker/llmworker/pkg/tool"
	"github.com/llmworker/llmworker/pkg/turn"
	"github.com/llmworker/llmworker/pkg/worker"
)

// stampStream records when its stream yields a block stop: the moment
// the model finished the block of a call.
type stampStream struct {
	llm.Stream
	at *atomic.Int64
}

func (s *stampStream) Next() bool {
	ok := s.Stream.Next()
	if _, stop := s.Current().(events.BlockStop); ok && stop {
		s.at.Store(time.Now().UnixNano())
	}
	return ok
}

// BenchmarkSubAgentStart runs turns of an agent whose instant model
// calls one sub-agent, and reports the time from the call's block stop
// in the parent's model stream to the child turn's first model request,
// p50 and p99: the parent's response, its tool checkpoint, the child's
// submit through LLMW_TURNS, its dispatch, start and first checkpoint.
func BenchmarkSubAgentStart(b *testing.B) { subAgentStart(b, newEnv(b)) }

// BenchmarkSubAgentStartLazyFsync is BenchmarkSubAgentStart on a server
// that fsyncs every two minutes.
func BenchmarkSubAgentStartLazyFsync(b *testing.B) { subAgentStart(b, newLazyEnv(b)) }

// helperModel is the instant model of BenchmarkSubAgentStart and
// BenchmarkSubAgentOverhead: a request for a model named *child answers
// (its time is stored in childAt), a parent's request calls helper, or
// answers once it has its result; the parent's stream stores when the
// call's block stopped in stopAt.
func helperModel(stopAt, childAt *atomic.Int64) llm.Provider {
	return llm.ProviderFunc(func(ctx context.Context, req *llm.Request) (llm.Stream, error) {
		if strings.Contains(req.Model, "child") {
			childAt.CompareAndSwap(0, time.Now().UnixNano())
			return llm.SliceStream(llmtest.TextStep("the child's answer").Events...), nil
		}
		for _, m := range req.Messages {
			for _, part := range m.Content {
				if part.Type == events.PartToolResult {
					return llm.SliceStream(llmtest.TextStep("done").Events...), nil
				}
			}
		}
		return &stampStream{Stream: llm.SliceStream(llmtest.ToolStep(llmtest.ToolCallSpec{ID: "call_1", Name: "helper", Input: `{"prompt":"help"}`}).Events...), at: stopAt}, nil
	})
}

func subAgentStart(b *testing.B, e *env) {
	var stopAt, childAt atomic.Int64
	e.startTurn(turn.Config{Provider: helperModel(&stopAt, &childAt)})
	reg := agents.New(e.js)
	ctx := context.Background()
	if _, _, err := reg.Put(ctx, events.AgentDefinition{Name: "helper", Model: "bench:child"}, agents.PutOptions{}); err != nil {
		b.Fatal(err)
	}
	if _, _, err := reg.Put(ctx, events.AgentDefinition{Name: "boss", Model: "bench:parent", Agents: []string{"helper"}}, agents.PutOptions{}); err != nil {
		b.Fatal(err)
	}
	te := e.turnEvents(b)
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		stopAt.Store(0)
		childAt.Store(0)
		id := "sa-" + strconv.Itoa(i)
		_, end := te.expect(id)
		e.submit(events.TurnRequest{TurnID: id, Agent: "boss", Messages: []events.Message{events.UserText("go")}})
		if typ := waitEnd(b, end); typ != events.TypeTurnCompleted {
			b.Fatalf("turn ended %s", typ)
		}
		if stopAt.Load() == 0 || childAt.Load() == 0 {
			b.Fatal("no sub-agent call, or no child model request")
		}
		lat = append(lat, time.Duration(childAt.Load()-stopAt.Load()))
	}
	b.StopTimer()
	b.ReportMetric(ms(percentile(lat, 0.5)), "p50-ms")
	b.ReportMetric(ms(percentile(lat, 0.99)), "p99-ms")
}

type promptArgs struct {
	Prompt string `json:"prompt"`
}

// BenchmarkSubAgentOverhead runs the turn of BenchmarkSubAgentStart
// (ns/op: one parent turn) with helper as a sub-agent (a child turn)
// and as an in-process tool that runs the same model call with
// pkg/worker: the difference is what a child turn costs over a call
// made inside the parent's tool.
func BenchmarkSubAgentOverhead(b *testing.B) {
	for _, child := range []bool{true, false} {
		name := "in-process-tool"
		if child {
			name = "child-turn"
		}
		b.Run(name, func(b *testing.B) {
			e := newLazyEnv(b)
			var stopAt, childAt atomic.Int64
			p := helperModel(&stopAt, &childAt)
			cfg := turn.Config{Provider: p}
			boss := events.AgentDefinition{Name: "boss", Model: "bench:parent", Agents: []string{"helper"}}
			if !child {
				boss.Agents, boss.Tools = nil, []string{"helper"}
				cfg.Tools = []tool.Tool{tool.Must("helper", "helps", func(ctx context.Context, a promptArgs) (string, error) {
					w, err := worker.New(worker.Config{Provider: p, Model: "bench:child"})
					if err != nil {
						return "", err
					}
					res, err := w.Run(ctx, []events.Message{events.UserText(a.Prompt)})
					if err != nil {
						return "", err
					}
					return res.Messages[len(res.Messages)-1].Text(), nil
				})}
			}
			e.startTurn(cfg)
			reg := agents.New(e.js)
			ctx := context.Background()
			if _, _, err := reg.Put(ctx, events.AgentDefinition{Name: "helper", Model: "bench:child"}, agents.PutOptions{}); err != nil {
				b.Fatal(err)
			}
			if _, _, err := reg.Put(ctx, boss, agents.PutOptions{}); err != nil {
				b.Fatal(err)
			}
			te := e.turnEvents(b)
			b.ResetTimer()
			for i := range b.N {
				id := "so-" + strconv.Itoa(i)
				_, end := te.expect(id)
				e.submit(events.TurnRequest{TurnID: id, Agent: "boss", Messages: []events.Message{events.UserText("go")}})
				if typ := waitEnd(b, end); typ != events.TypeTurnCompleted {
					b.Fatalf("turn ended %s", typ)
				}
			}
		})
	}
}
