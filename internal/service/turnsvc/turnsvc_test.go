package turnsvc_test

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/llmworker/llmworker/internal/service"
	"github.com/llmworker/llmworker/internal/service/turnsvc"
	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/ingest"
	"github.com/llmworker/llmworker/pkg/llm/llmtest"
	"github.com/llmworker/llmworker/pkg/natstest"
	"github.com/llmworker/llmworker/pkg/turn"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// startIngest serves model "script:m" from p on srv, through pkg/ingest.
func startIngest(t *testing.T, srv *natstest.Server, p *llmtest.Scripted) {
	t.Helper()
	in, err := ingest.New(srv.NC, ingest.Config{Instance: "i1", Providers: map[string]ingest.Factory{"script": ingest.Static(p)}, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	if err := in.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := in.Stop(ctx); err != nil {
			t.Error(err)
		}
	})
}

// The service runs a submitted turn to its end — the model's answer is
// the turn's last message — and drains on Stop.
func TestCompletesATurnAndDrains(t *testing.T) {
	srv := natstest.Start(t, natstest.Options{})
	const answer = "It is sunny in Oslo."
	startIngest(t, srv, llmtest.NewScripted(llmtest.TextStep("It is sunny ", "in Oslo.")))

	svc := &turnsvc.Service{}
	root, cancel := context.WithCancel(context.Background())
	defer cancel()
	st, err := svc.Start(root, service.Env{NC: srv.NC, Instance: "turn-1", Log: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = st.Stop(context.Background())
		}
	})
	if svc.Watcher == nil {
		t.Error("no hook registry watcher")
	}

	ctx := natstest.Context(t)
	c, err := turn.NewClient(srv.NC, turn.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	f, err := c.Follow(ctx, c.Subjects().EventsOfTurn("t1"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Stop()
	if err := c.Submit(ctx, &events.TurnRequest{TurnID: "t1", Model: "script:m", Messages: []events.Message{events.UserText("Weather in Oslo?")}}); err != nil {
		t.Fatal(err)
	}
	var done events.TurnCompleted
wait:
	for {
		select {
		case it := <-f.C():
			if it.Err != nil {
				t.Fatal(it.Err)
			}
			switch ev := it.Event.(type) {
			case events.TurnCompleted:
				done = ev
				break wait
			case events.TurnFailed, events.TurnAborted:
				t.Fatalf("the turn ended with %s: %+v", it.Env.Type, ev)
			}
		case <-ctx.Done():
			t.Fatal("no llmw.turn.completed")
		}
	}
	if n := len(done.Messages); n == 0 || done.Messages[n-1].Role != events.RoleAssistant || done.Messages[n-1].Text() != answer {
		t.Fatalf("transcript %+v, want it to end with the assistant's %q", done.Messages, answer)
	}

	sctx, scancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer scancel()
	stopped = true
	if err := st.Stop(sctx); err != nil {
		t.Fatalf("Stop: %v", err)
	}
}
