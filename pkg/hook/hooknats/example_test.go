package hooknats_test

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/nats-io/nats.go"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/hook"
	"github.com/llmworker/llmworker/pkg/hook/hooknats"
	"github.com/llmworker/llmworker/pkg/natstest"
)

// The turn side: Watch keeps a chain in sync with LLMW_HOOKS; any NATS
// client answering on the registered subject is a hook (here a bare JSON
// reply, as a script in any language could send).
func ExampleWatch() {
	srv, err := natstest.New(natstest.Options{Provision: true}) // or nats.Connect(yourServerURL)
	if err != nil {
		panic(err)
	}
	defer srv.Close()
	nc, js := srv.NC, srv.JS
	ctx := context.Background()

	// A responder that masks digits in results.
	sub, _ := nc.Subscribe("team.hooks.mask", func(m *nats.Msg) {
		env, _ := events.DecodeEnvelope(m.Header, m.Data)
		req, _ := events.DecodeData[events.HookRequest](env)
		res := *req.ToolResult
		res.Content = "[masked]"
		b, _ := json.Marshal(events.HookResponse{Result: events.HookContinue, ToolResult: &res})
		_ = m.Respond(b)
	})
	defer sub.Unsubscribe()

	chain := &hook.Chain{}
	w, _ := hooknats.Watch(ctx, js, chain, hooknats.WatchOptions{})
	defer w.Stop()
	kv, _ := hooknats.Bucket(ctx, js)
	rev, _ := hooknats.Register(ctx, kv, events.HookRegistration{
		Name: "mask", Event: events.HookAfterToolCall, Subject: "team.hooks.mask", TimeoutMS: 2000,
	})
	_ = w.WaitRevision(ctx, rev) // in the chain from the next hook point on

	in := &hook.ToolResultInput{
		Turn:   &hook.Turn{ID: "turn-1"},
		Call:   events.ToolCall{ID: "c1", Name: "lookup"},
		Result: events.ToolResult{ToolUseID: "c1", Content: "card 4111 1111 1111 1111"},
	}
	out := chain.RunAfterToolCall(ctx, in)
	fmt.Println(out.Kind, in.Result.Content)
	// Output:
	// continue [masked]
}
