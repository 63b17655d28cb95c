package toolexec_test

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/natstest"
	"github.com/llmworker/llmworker/pkg/tool"
	"github.com/llmworker/llmworker/pkg/toolexec"
)

type WeatherArgs struct {
	City string `json:"city" description:"City name, e.g. Tokyo"`
}

// Hosting your own typed tools in your own binary: build them with
// tool.New and hand them to toolexec.Serve. Every replica you start shares
// the work.
func Example() {
	srv, err := natstest.New(natstest.Options{}) // or nats.Connect(yourServerURL)
	if err != nil {
		panic(err)
	}
	defer srv.Close()
	nc := srv.NC

	weather := tool.Must("get_weather", "Current weather for a city.",
		func(_ context.Context, a WeatherArgs) (string, error) {
			return "sunny in " + a.City, nil
		})

	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	served := make(chan error, 1)
	go func() { served <- toolexec.Serve(ctx, nc, weather) }()

	// The turn side: find the tool in the catalog and call it.
	js, _ := jetstream.New(nc)
	entry, err := lookup(js, "get_weather")
	if err != nil {
		fmt.Println(err)
		return
	}
	rt := toolexec.NewClient(nc, js, toolexec.ClientOptions{}).Tool(entry)
	callCtx := tool.WithCall(context.Background(), tool.CallInfo{TurnID: "turn1", CallID: "call1"})
	out, err := rt.Execute(callCtx, json.RawMessage(`{"city":"Tokyo"}`))
	fmt.Println(out, err)

	stop()
	fmt.Println(<-served)
	// Output:
	// sunny in Tokyo <nil>
	// <nil>
}

// lookup waits until a replica has published the tool in the catalog,
// following the catalog's changes.
func lookup(js jetstream.JetStream, name string) (e events.ToolCatalogEntry, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var cat *toolexec.Catalog
	for cat == nil {
		// The catalog's bucket exists once the replica provisioned it.
		if cat, err = toolexec.OpenCatalog(ctx, js); err != nil {
			select {
			case <-ctx.Done():
				return e, fmt.Errorf("no tool catalog: %w", err)
			case <-time.After(10 * time.Millisecond):
			}
		}
	}
	w, err := cat.Watch(ctx)
	if err != nil {
		return e, err
	}
	defer func() { _ = w.Stop() }()
	for {
		changed := w.Changed()
		if e, ok := w.Get(name); ok {
			return e, nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return e, fmt.Errorf("tool %s not in the catalog", name)
		}
	}
}
