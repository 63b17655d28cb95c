package toolexecsvc_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"slices"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/llmworker/llmworker/internal/service"
	"github.com/llmworker/llmworker/internal/service/toolexecsvc"
	"github.com/llmworker/llmworker/pkg/natstest"
	"github.com/llmworker/llmworker/pkg/tool"
	"github.com/llmworker/llmworker/pkg/toolexec"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type holdArgs struct {
	Text string `json:"text"`
}

// The service hosts the built-in tools and the extra ones on NATS: a
// client finds them in the catalog and gets a call's result, and a Stop
// while a call runs lets the call finish and answer before it returns.
func TestServesACallAndDrains(t *testing.T) {
	srv := natstest.Start(t, natstest.Options{})
	started, release := make(chan struct{}), make(chan struct{})
	hold := tool.Must("hold", "Answers its text once the test lets it.", func(_ context.Context, a holdArgs) (string, error) {
		close(started)
		<-release
		return a.Text, nil
	})
	svc := &toolexecsvc.Service{Options: toolexecsvc.Options{Extra: []tool.Tool{hold}}}
	root, cancel := context.WithCancel(context.Background())
	defer cancel()
	st, err := svc.Start(root, service.Env{NC: srv.NC, Instance: "t1", Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"calculator", "current_time", "hold"} {
		if !slices.Contains(svc.Tools, name) {
			t.Errorf("hosted tools %v lack %s", svc.Tools, name)
		}
	}
	for _, name := range []string{"read_file", "list_dir"} {
		if slices.Contains(svc.Tools, name) {
			t.Errorf("%s hosted without a root: %v", name, svc.Tools)
		}
	}

	ctx := natstest.Context(t)
	cat, err := toolexec.OpenCatalog(ctx, srv.JS)
	if err != nil {
		t.Fatal(err)
	}
	client := toolexec.NewClient(srv.NC, srv.JS, toolexec.ClientOptions{})
	remote := func(name string) tool.Tool {
		t.Helper()
		e, err := cat.Get(ctx, name)
		if err != nil {
			t.Fatalf("%s not in the catalog: %v", name, err)
		}
		return client.Tool(e)
	}
	// (2 + 3) * 4 ^ 2 = 5 * 16.
	out, err := remote("calculator").Execute(tool.WithCall(ctx, tool.CallInfo{TurnID: "t1", CallID: "c1"}), json.RawMessage(`{"expression":"(2 + 3) * 4 ^ 2"}`))
	if err != nil || out != "80" {
		t.Fatalf("calculator = %q, %v; want 80", out, err)
	}

	type result struct {
		out string
		err error
	}
	answered := make(chan result, 1)
	go func() {
		out, err := remote("hold").Execute(tool.WithCall(ctx, tool.CallInfo{TurnID: "t1", CallID: "c2"}), json.RawMessage(`{"text":"held"}`))
		answered <- result{out, err}
	}()
	<-started
	stopped := make(chan error, 1)
	go func() {
		sctx, scancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer scancel()
		stopped <- st.Stop(sctx)
	}()
	select {
	case err := <-stopped:
		t.Fatalf("Stop returned (%v) while a call ran", err)
	case <-time.After(100 * time.Millisecond):
	}
	close(release)
	if err := <-stopped; err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if r := <-answered; r.err != nil || r.out != "held" {
		t.Fatalf("call in flight during the drain = %q, %v; want held", r.out, r.err)
	}
}
