package builtin_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/hook"
	"github.com/llmworker/llmworker/pkg/hook/builtin"
)

// Every invalid config is refused by Validate, New and AddTo alike, with a
// *FieldError naming the field a config file would have to fix.
func TestValidateNamesTheField(t *testing.T) {
	cases := []struct {
		cfg   builtin.Config
		field string
	}{
		{builtin.DenyTools{}, "pattern"},
		{builtin.DenyTools{Pattern: "[z-a]"}, "pattern"},
		{builtin.RequireApproval{Pattern: "("}, "pattern"},
		{builtin.RewriteInput{}, ""},
		{builtin.RewriteInput{Set: map[string]any{"a..b": 1}}, "set.a..b"},
		{builtin.RewriteInput{Delete: []string{"ok", ".bad"}}, "delete[1]"},
		{builtin.LimitToolCalls{Max: -1}, "max"},
		{builtin.MaskResult{}, ""},
		{builtin.MaskResult{Presets: []string{"emails", "phones"}}, "presets[1]"},
		{builtin.MaskResult{Patterns: []builtin.MaskPattern{{Regex: "*"}}}, "patterns[0].regex"},
		{builtin.InjectMessage{}, "text"},
		{builtin.InjectMessage{Text: "x", Position: "middle"}, "position"},
		{builtin.InjectMessage{Text: "x", Timezone: "Mars/Olympus"}, "timezone"},
		{builtin.ValidateJSON{Schema: json.RawMessage(`{"type":12}`)}, "schema"},
	}
	for _, c := range cases {
		for name, err := range map[string]error{
			"Validate": c.cfg.Validate(),
			"New":      func() error { _, err := builtin.New(c.cfg); return err }(),
			"AddTo":    builtin.AddTo(&hook.Chain{}, c.cfg, hook.Options{}),
		} {
			var fe *builtin.FieldError
			if !errors.As(err, &fe) || fe.Field != c.field || !errors.Is(err, builtin.ErrInvalidConfig) {
				t.Errorf("%s %#v: %v, want a FieldError on %q", name, c.cfg, err, c.field)
			}
		}
	}
}

// Every type name has a config, and every config builds the hook of its
// hook point.
func TestTypes(t *testing.T) {
	valid := map[string]builtin.Config{
		"deny_tools": builtin.DenyTools{Pattern: "x"}, "require_approval": builtin.RequireApproval{Pattern: "x"},
		"rewrite_input": builtin.RewriteInput{Delete: []string{"a"}}, "limit_tool_calls": builtin.LimitToolCalls{Max: 1},
		"mask_result": builtin.MaskResult{Presets: []string{"emails"}}, "inject_message": builtin.InjectMessage{Text: "x"},
		"validate_json": builtin.ValidateJSON{},
	}
	for _, typ := range builtin.Types {
		zero, ok := builtin.ConfigOf(typ)
		if !ok || zero.Type() != typ {
			t.Fatalf("ConfigOf(%q) = %v, %v", typ, zero, ok)
		}
		cfg := valid[typ]
		h, err := builtin.New(cfg)
		if err != nil {
			t.Fatalf("%s: %v", typ, err)
		}
		var ev events.HookEvent
		switch h.(type) {
		case hook.MessageSendHook:
			ev = events.HookOnMessageSend
		case hook.BeforeToolCallHook:
			ev = events.HookBeforeToolCall
		case hook.AfterToolCallHook:
			ev = events.HookAfterToolCall
		case hook.TurnEndHook:
			ev = events.HookOnTurnEnd
		}
		if ev != cfg.Event() {
			t.Errorf("%s: hook %T runs at %s, config says %s", typ, h, ev, cfg.Event())
		}
	}
	if _, ok := builtin.ConfigOf("teleport"); ok {
		t.Error("unknown type accepted")
	}
}

// The call counter lives in the turn's variables: the chain commits them,
// so the limit holds across calls and survives a checkpoint.
func TestLimitToolCallsCountsInTurnVariables(t *testing.T) {
	chain := &hook.Chain{}
	if err := builtin.AddTo(chain, builtin.LimitToolCalls{Max: 2, Name: "budget"}, hook.Options{Name: "budget"}); err != nil {
		t.Fatal(err)
	}
	turn := &hook.Turn{ID: "t"}
	var got []string
	for range 3 {
		out := chain.RunBeforeToolCall(context.Background(), &hook.ToolCallInput{Turn: turn, Call: events.ToolCall{ID: "c", Name: "x"}})
		got = append(got, out.Result.Action.String())
	}
	if got[0] != "continue" || got[1] != "continue" || got[2] != "skip" {
		t.Errorf("actions %v, want continue continue skip", got)
	}
	if turn.Vars["tool_calls:budget"] != "2" {
		t.Errorf("vars %v", turn.Vars)
	}
}

// A rewrite through a value that is neither object nor array fails the
// hook (fail_closed aborts) instead of sending a half-made input.
func TestRewriteInputFailsOnImpossibleSet(t *testing.T) {
	h, err := builtin.RewriteInput{Set: map[string]any{"a.b": 1}}.Hook()
	if err != nil {
		t.Fatal(err)
	}
	in := &hook.ToolCallInput{Turn: &hook.Turn{}, Call: events.ToolCall{ID: "c", Name: "x", Input: json.RawMessage(`{"a":"str"}`)}}
	if _, err := h.Call(context.Background(), in); err == nil {
		t.Fatal("set through a string succeeded")
	}
	if string(in.Call.Input) != `{"a":"str"}` {
		t.Errorf("input changed to %s", in.Call.Input)
	}
}
