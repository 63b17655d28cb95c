package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/llmworker/llmworker/internal/leaf/natsutil"
	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/ingest"
	"github.com/llmworker/llmworker/pkg/llm"
	"github.com/llmworker/llmworker/pkg/llm/llmtest"
	"github.com/llmworker/llmworker/pkg/provision"
	"github.com/llmworker/llmworker/pkg/tool"
	"github.com/llmworker/llmworker/pkg/toolexec"
	"github.com/llmworker/llmworker/pkg/turn"
	"github.com/llmworker/llmworker/pkg/worker"
)

// The agent turn every runtime runs: steps model calls; each of the
// first steps-1 answers with par calls of the echo tool, the last with
// a text. The scripted model counts the tool results in its input, so
// that a resumed turn (after a crash) asks for what is still missing.
const steps = 10

func toolResults(req *llm.Request) int {
	n := 0
	for _, m := range req.Messages {
		for _, p := range m.Content {
			if p.Type == events.PartToolResult {
				n++
			}
		}
	}
	return n
}

// scriptedModel is llmworker's side of the scripted model: an
// llm.Provider answering at once with a normalized event stream.
func scriptedModel(par int) llm.Provider {
	return llm.ProviderFunc(func(ctx context.Context, req *llm.Request) (llm.Stream, error) {
		step := toolResults(req) / par
		if step >= steps-1 {
			return llm.SliceStream(llmtest.TextStep("done").Events...), nil
		}
		calls := make([]llmtest.ToolCallSpec, par)
		for i := range calls {
			n := step*par + i
			calls[i] = llmtest.ToolCallSpec{ID: "call_" + strconv.Itoa(n), Name: "echo", Input: `{"n":` + strconv.Itoa(n) + `}`}
		}
		return llm.SliceStream(llmtest.ToolStep(calls...).Events...), nil
	})
}

type echoArgs struct {
	N int `json:"n"`
}

// echoTool answers at once; before, when set, runs first (the crash
// measurement blocks one call in it).
func echoTool(before func(n int)) tool.Tool {
	return tool.Must("echo", "echoes n", func(ctx context.Context, a echoArgs) (string, error) {
		if before != nil {
			before(a.N)
		}
		return strconv.Itoa(a.N), nil
	})
}

// quiet discards logs, unless PEERS_DEBUG is set (then they go to stderr).
func quiet() *slog.Logger {
	if os.Getenv("PEERS_DEBUG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// llmwCluster is the distributed llmworker: an embedded nats-server and,
// unless the crash measurement runs them in a child process, ingest
// serving the scripted model, toolexec hosting the echo tool and the turn
// service with its checkpoints, each on its own connection as separate
// processes would be.
type llmwCluster struct {
	emb     *natsutil.Embedded
	nc      *nats.Conn
	client  *turn.Client
	stops   []func()
	mu      sync.Mutex
	waiting map[string]chan string
}

// llmwServices are ingest, toolexec and the turn service on url.
type llmwServices struct {
	par     int
	storage string
	// failover, when set, is the AckWait of the turn and tool consumers.
	failover time.Duration
	before   func(int)
	// localTools runs the echo tool inside the turn service
	// (turn.Config.Tools) instead of on toolexec: the shape of Temporal's
	// local activities, which run inside the workflow's worker.
	localTools bool
	// localModel runs the scripted model inside the turn service
	// (turn.Config.Provider) instead of behind ingest, as Temporal's
	// local-activity worker runs the model's activity.
	localModel bool
}

func (o llmwServices) start(url string) (stop func(), err error) {
	var stops []func()
	stop = func() {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
	}
	prov := provision.Options{Memory: o.storage == "memory"}
	conn := func() (*nats.Conn, error) {
		nc, err := nats.Connect(url)
		if err == nil {
			stops = append(stops, nc.Close)
		}
		return nc, err
	}
	ctx := context.Background()
	stopCtx := func(f func(context.Context) error) func() {
		return func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_ = f(ctx)
		}
	}
	fail := func(err error) (func(), error) { stop(); return nil, err }

	var nc *nats.Conn
	if !o.localModel { // else the turn service calls the model itself
		if nc, err = conn(); err != nil {
			return fail(err)
		}
		ing, err := ingest.New(nc, ingest.Config{Providers: map[string]ingest.Factory{"test": ingest.Static(scriptedModel(o.par))}, Logger: quiet()})
		if err != nil {
			return fail(err)
		}
		if err := ing.Start(ctx); err != nil {
			return fail(err)
		}
		stops = append(stops, stopCtx(ing.Stop))
	}

	if !o.localTools { // else the turn service runs the tool and no toolexec is needed
		if nc, err = conn(); err != nil {
			return fail(err)
		}
		te, err := toolexec.New(nc, toolexec.Config{Logger: quiet(), Provision: prov, AckWait: o.failover})
		if err != nil {
			return fail(err)
		}
		if err := te.Register(echoTool(o.before)); err != nil {
			return fail(err)
		}
		if err := te.Start(ctx); err != nil {
			return fail(err)
		}
		stops = append(stops, stopCtx(te.Stop))
	}

	if nc, err = conn(); err != nil {
		return fail(err)
	}
	tc := turn.Config{Logger: quiet(), Provision: prov, AckWait: o.failover}
	if o.localTools {
		tc.Tools = []tool.Tool{echoTool(o.before)}
	}
	if o.localModel {
		tc.Provider = scriptedModel(o.par)
	}
	ts, err := turn.New(nc, tc)
	if err != nil {
		return fail(err)
	}
	if err := ts.Start(ctx); err != nil {
		return fail(err)
	}
	stops = append(stops, stopCtx(ts.Stop))
	return stop, nil
}

// startLLMW starts the server, and the services when svc is not nil.
func startLLMW(svc *llmwServices) (*llmwCluster, error) {
	emb, err := natsutil.StartEmbedded(natsutil.EmbeddedOptions{})
	if err != nil {
		return nil, err
	}
	c := &llmwCluster{emb: emb, waiting: map[string]chan string{}}
	c.stops = append(c.stops, emb.Shutdown)
	fail := func(err error) (*llmwCluster, error) { c.close(); return nil, err }
	if svc != nil {
		stop, err := svc.start(emb.URL())
		if err != nil {
			return fail(err)
		}
		c.stops = append(c.stops, stop)
	}
	if c.nc, err = nats.Connect(emb.URL()); err != nil {
		return fail(err)
	}
	c.stops = append(c.stops, c.nc.Close)
	if c.client, err = turn.NewClient(c.nc, turn.ClientOptions{}); err != nil {
		return fail(err)
	}
	sub, err := c.nc.Subscribe(c.client.Subjects().P()+".events.>", func(m *nats.Msg) {
		switch typ := m.Header.Get(events.HeaderType); typ {
		case events.TypeTurnCompleted, events.TypeTurnFailed, events.TypeTurnAborted:
			id := m.Header.Get(events.HeaderTurnID)
			c.mu.Lock()
			ch := c.waiting[id]
			delete(c.waiting, id)
			c.mu.Unlock()
			if ch != nil {
				ch <- typ
			}
		}
	})
	if err != nil {
		return fail(err)
	}
	_ = sub.SetPendingLimits(-1, -1)
	if err := c.nc.Flush(); err != nil {
		return fail(err)
	}
	return c, nil
}

func (c *llmwCluster) close() {
	for i := len(c.stops) - 1; i >= 0; i-- {
		c.stops[i]()
	}
}

// submit starts turn id; the returned channel gets its terminal event type.
func (c *llmwCluster) submit(id string) (<-chan string, error) {
	ch := make(chan string, 1)
	c.mu.Lock()
	c.waiting[id] = ch
	c.mu.Unlock()
	err := c.client.Submit(context.Background(), &events.TurnRequest{TurnID: id, Model: "test:m", Messages: []events.Message{events.UserText("go")}, Tools: []string{"echo"}})
	return ch, err
}

func (c *llmwCluster) runTurn(id string, limit time.Duration) error {
	ch, err := c.submit(id)
	if err != nil {
		return err
	}
	select {
	case typ := <-ch:
		if typ != events.TypeTurnCompleted {
			return fmt.Errorf("turn %s ended %s", id, typ)
		}
		return nil
	case <-time.After(limit):
		return fmt.Errorf("turn %s did not end within %v", id, limit)
	}
}

// llmwDurable measures turns through NATS.
func llmwDurable(svc llmwServices, o runOpts) (*result, error) {
	c, err := startLLMW(&svc)
	if err != nil {
		return nil, err
	}
	defer c.close()
	i := 0
	return measure(o, func() error {
		i++
		return c.runTurn("t-"+strconv.Itoa(i), time.Minute)
	})
}

// llmwInProcess measures pkg/worker running the turn in-process (no NATS).
func llmwInProcess(par int, o runOpts) (*result, error) {
	w, err := worker.New(worker.Config{Provider: scriptedModel(par), Model: "test:m", Tools: []tool.Tool{echoTool(nil)}})
	if err != nil {
		return nil, err
	}
	msgs := []events.Message{events.UserText("go")}
	return measure(o, func() error {
		res, err := w.Run(context.Background(), msgs)
		if err != nil {
			return err
		}
		if res.Status != worker.StatusCompleted || res.Steps != steps {
			return fmt.Errorf("turn ended %s after %d steps", res.Status, res.Steps)
		}
		return nil
	})
}
