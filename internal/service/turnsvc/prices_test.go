package turnsvc_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/llmworker/llmworker/internal/leaf/poll"
	"github.com/llmworker/llmworker/internal/service"
	"github.com/llmworker/llmworker/internal/service/turnsvc"
	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/llm/llmtest"
	"github.com/llmworker/llmworker/pkg/natstest"
	"github.com/llmworker/llmworker/pkg/turn"
)

// A price file that cannot be used stops the service from starting, and
// the error names the flag, the file and what is wrong.
func TestBadPriceFileIsAUsageError(t *testing.T) {
	srv := natstest.Start(t, natstest.Options{})
	dir := t.TempDir()
	bad := filepath.Join(dir, "prices.json")
	if err := os.WriteFile(bad, []byte(`{"models":{"script:m":{"input":1}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	for file, want := range map[string]string{
		bad:                               `models["script:m"].output is required`,
		filepath.Join(dir, "absent.json"): "no such file",
	} {
		svc := &turnsvc.Service{Options: turnsvc.Options{Prices: file}}
		st, err := svc.Start(context.Background(), service.Env{NC: srv.NC, Instance: "turn-1", Log: quiet()})
		if err == nil {
			_ = st.Stop(context.Background())
			t.Fatalf("%s: started", file)
		}
		if !errors.Is(err, service.ErrUsage) || !strings.Contains(err.Error(), "--prices") || !strings.Contains(err.Error(), want) {
			t.Fatalf("%s: err %v, want --prices and %q", file, err, want)
		}
	}
}

// The completed event carries the cost by the price file (500 input and
// 100 output tokens at 2 and 10 per million: 0.002), and a changed file
// prices the next turn (input 4: 0.003).
func TestPriceFileCostsAndReload(t *testing.T) {
	srv := natstest.Start(t, natstest.Options{})
	p := llmtest.NewScripted()
	p.SetFallback(llmtest.TextStep("ok").WithUsage(500, 100))
	startIngest(t, srv, p)
	file := filepath.Join(t.TempDir(), "prices.yaml")
	write := func(input string) {
		if err := os.WriteFile(file, []byte("models:\n  script:m:\n    input: "+input+"\n    output: 10\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("2")
	svc := &turnsvc.Service{Options: turnsvc.Options{Prices: file, PricesReload: 10 * time.Millisecond}}
	st, err := svc.Start(context.Background(), service.Env{NC: srv.NC, Instance: "turn-1", Log: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = st.Stop(context.Background()) }()
	c, err := turn.NewClient(srv.NC, turn.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := natstest.Context(t)
	run := func(id string) events.TurnCompleted {
		t.Helper()
		f, err := c.Follow(ctx, c.Subjects().EventsOfTurn(id))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Stop()
		if err := c.Submit(ctx, &events.TurnRequest{TurnID: id, Model: "script:m", Messages: []events.Message{events.UserText("hi")}}); err != nil {
			t.Fatal(err)
		}
		for {
			select {
			case it := <-f.C():
				if it.Err != nil {
					t.Fatal(it.Err)
				}
				switch ev := it.Event.(type) {
				case events.TurnCompleted:
					return ev
				case events.TurnFailed, events.TurnAborted:
					t.Fatalf("the turn ended with %s: %+v", it.Env.Type, ev)
				}
			case <-ctx.Done():
				t.Fatal("no llmw.turn.completed")
			}
		}
	}
	if done := run("t1"); done.Cost == nil || *done.Cost != 0.002 {
		t.Fatalf("cost %v, want 0.002", done.Cost)
	}
	later := time.Now().Add(time.Minute)
	write("4")
	_ = os.Chtimes(file, later, later)
	n := 1
	poll.Until(t, 10*time.Second, "the changed price file applied", func() bool {
		n++
		done := run("t" + strconv.Itoa(n))
		return done.Cost != nil && *done.Cost == 0.003
	})
}
