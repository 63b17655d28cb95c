package a2a_test

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	spec "github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2aclient/agentcard"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"

	"github.com/llmworker/llmworker/internal/cli"
	"github.com/llmworker/llmworker/internal/replay"
	"github.com/llmworker/llmworker/internal/service/hookbridgesvc"
	"github.com/llmworker/llmworker/internal/service/toolexecsvc"
	"github.com/llmworker/llmworker/pkg/a2a"
	"github.com/llmworker/llmworker/pkg/agents"
	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/ingest"
	"github.com/llmworker/llmworker/pkg/llm"
	"github.com/llmworker/llmworker/pkg/llm/llmtest"
	"github.com/llmworker/llmworker/pkg/natstest"
)

func TestMain(m *testing.M) {
	// The genai SDK's dependencies (through the stack's ingest) start an
	// opencensus worker in an init function; it is not ours.
	goleak.VerifyTestMain(m, append(natstest.NotOurGoroutines(), goleak.IgnoreTopFunction("go.opencensus.io/stats/view.(*worker).start"))...)
}

// stackOpts say what a test stack runs.
type stackOpts struct {
	// approve pauses every call of this tool for approval ("" = none).
	approve string
	// script answers the models "script:<any>".
	script *llmtest.Scripted
}

// startStack runs NATS and the services, the gateway among them (as
// `llmworker up` does), with a scripted model and the demo tools, and
// puts the agent "helper" (model script:helper, tool get_capital) in the
// registry.
func startStack(t *testing.T, o stackOpts) *cli.Stack {
	t.Helper()
	cfg := cli.StackConfig{
		Services: []string{cli.SvcToolexec, cli.SvcHookbridge, cli.SvcTurn, cli.SvcGateway},
		Getenv:   func(string) string { return "" },
		Toolexec: toolexecsvc.Options{Replay: true},
	}
	if o.approve != "" {
		p := filepath.Join(t.TempDir(), "hooks.yaml")
		yaml := "hooks:\n  - name: approve-it\n    builtin:\n      type: require_approval\n      pattern: \"^" + o.approve + "$\"\n      reason: needs a person\n"
		if err := os.WriteFile(p, []byte(yaml), 0o600); err != nil {
			t.Fatal(err)
		}
		cfg.Hookbridge = hookbridgesvc.Options{Config: p}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := cli.StartStack(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := st.Stop(ctx); err != nil {
			t.Error(err)
		}
	})
	startIngest(t, st, o.script)
	if err := st.SyncHooks(ctx); err != nil {
		t.Fatal(err)
	}
	putAgent(t, st, events.AgentDefinition{Name: "helper", Description: "Answers questions about capitals.", Model: "script:helper", Tools: []string{"get_capital"}})
	return st
}

// startIngest runs ingest on st with the replay models and script.
func startIngest(t *testing.T, st *cli.Stack, script *llmtest.Scripted) {
	t.Helper()
	rs, err := replay.NewServer(replay.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rs.Close() })
	ing, err := ingest.New(st.NC, ingest.Config{
		Prefix: st.Prefix, Logger: slog.New(slog.DiscardHandler),
		Providers: map[string]ingest.Factory{
			replay.Prefix: rs.Factory(),
			"script":      func(string) (llm.Provider, error) { return script, nil },
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := ing.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = ing.Stop(ctx)
	})
}

func putAgent(t *testing.T, st *cli.Stack, def events.AgentDefinition) uint64 {
	t.Helper()
	js, err := jetstream.New(st.NC)
	if err != nil {
		t.Fatal(err)
	}
	rev, _, err := agents.New(js).Put(ctxT(t), def, agents.PutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return rev
}

// startReplica serves another A2A server of st, as a second gateway
// replica would.
func startReplica(t *testing.T, st *cli.Stack) *httptest.Server {
	t.Helper()
	s, err := a2a.New(ctxT(t), st.NC, a2a.Config{Prefix: st.Prefix})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s)
	t.Cleanup(func() {
		s.Close()
		srv.CloseClientConnections()
		srv.Close()
	})
	return srv
}

// client is a2a-go's client of the agent at base (the gateway's URL),
// resolved from its card.
func client(t *testing.T, base, agent string, opts ...a2aclient.FactoryOption) (*a2aclient.Client, *spec.AgentCard) {
	t.Helper()
	return clientOf(t, base, agent, nil, opts...)
}

// clientOf is client with resolve options.
func clientOf(t *testing.T, base, agent string, ro []agentcard.ResolveOption, opts ...a2aclient.FactoryOption) (*a2aclient.Client, *spec.AgentCard) {
	t.Helper()
	card, err := agentcard.DefaultResolver.Resolve(ctxT(t), base+a2a.PathPrefix+agent, ro...)
	if err != nil {
		t.Fatal(err)
	}
	c, err := a2aclient.NewFromCard(ctxT(t), card, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Destroy() })
	return c, card
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func userText(s string) *spec.SendMessageRequest {
	return &spec.SendMessageRequest{Message: spec.NewMessage(spec.MessageRoleUser, spec.NewTextPart(s))}
}

// artifactText joins the text of a task's artifacts.
func artifactText(task *spec.Task) string {
	var b strings.Builder
	for _, a := range task.Artifacts {
		for _, p := range a.Parts {
			b.WriteString(p.Text())
		}
	}
	return b.String()
}
