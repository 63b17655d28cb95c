package hookbridge_test

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/hook"
	"github.com/llmworker/llmworker/pkg/hook/hooknats"
	"github.com/llmworker/llmworker/pkg/hookbridge"
	"github.com/llmworker/llmworker/pkg/natstest"
)

// A Go program serving a hook: a handler and a registration are all it
// takes. The turn side (here a hook.Chain fed by hooknats.Watch, as the
// turn service does) calls it for every matching tool call.
func Example() {
	srv, err := natstest.New(natstest.Options{}) // or nats.Connect(yourServerURL)
	if err != nil {
		panic(err)
	}
	defer srv.Close()
	nc := srv.NC
	ctx := context.Background()

	// The hook: no deletes outside /tmp.
	b, _ := hooknats.NewServer(nc, hooknats.ServerConfig{})
	_ = b.HandleFunc(ctx, events.HookRegistration{Name: "tmp-only", Event: events.HookBeforeToolCall, Matcher: "^delete_file$"},
		func(_ context.Context, req *events.HookRequest) (*events.HookResponse, error) {
			var in struct{ Path string }
			_ = json.Unmarshal(req.ToolCall.Input, &in)
			if len(in.Path) < 5 || in.Path[:5] != "/tmp/" {
				return hooknats.Respond(events.HookSkip, "only files under /tmp may be deleted"), nil
			}
			return nil, nil // continue
		})
	_ = b.Start(ctx)
	defer b.Stop(ctx)

	// The turn side.
	js, _ := jetstream.New(nc)
	chain := &hook.Chain{}
	w, _ := hooknats.Watch(ctx, js, chain, hooknats.WatchOptions{})
	defer w.Stop()

	for _, path := range []string{"/tmp/scratch.txt", "/etc/passwd"} {
		input, _ := json.Marshal(map[string]string{"path": path})
		out := chain.RunBeforeToolCall(ctx, &hook.ToolCallInput{
			Turn: &hook.Turn{ID: "turn-1"},
			Call: events.ToolCall{ID: "c1", Name: "delete_file", Input: input},
		})
		fmt.Printf("%s: %s %q\n", path, out.Kind, out.Result.Reason)
	}
	// Output:
	// /tmp/scratch.txt: continue ""
	// /etc/passwd: skip "only files under /tmp may be deleted"
}

// A config file's hooks, parsed and ready to serve (cmd/hookbridge does
// this with --config).
func ExampleParseConfig() {
	f, err := hookbridge.ParseConfig("hooks.yaml", []byte(`
hooks:
  - name: no-shell
    builtin: {type: deny_tools, pattern: "^shell$"}
  - name: mask
    builtin: {type: mask_result, presets: [secrets]}
`), hookbridge.ParseOptions{})
	if err != nil {
		panic(err)
	}
	for _, h := range f.Hooks {
		fmt.Printf("%s %s matcher=%q\n", h.Registration.Name, h.Registration.Event, h.Registration.Matcher)
	}
	_, err = hookbridge.ParseConfig("hooks.yaml", []byte("hooks:\n  - name: x\n    builtin: {type: deny_tools}\n"), hookbridge.ParseOptions{})
	fmt.Println(err)
	// Output:
	// no-shell before_tool_call matcher="^shell$"
	// mask after_tool_call matcher=""
	// hooks.yaml:3:14: hooks[0].builtin.pattern: is required: a regular expression on the tool name
}
