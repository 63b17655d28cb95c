package hooknats_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/hook"
	"github.com/llmworker/llmworker/pkg/hook/hooknats"
	"github.com/llmworker/llmworker/pkg/hook/hooktest"
)

// syncBuffer is a log sink the watcher's goroutine writes while the test
// reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// watchLogged starts a watcher whose log the test reads.
func (e env) watchLogged(t *testing.T) (*hook.Chain, *hooknats.Watcher, *syncBuffer) {
	t.Helper()
	buf := &syncBuffer{}
	c := &hook.Chain{}
	w, err := hooknats.Watch(ctx(t), e.js, c, hooknats.WatchOptions{Logger: slog.New(slog.NewTextHandler(buf, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := w.Stop(); err != nil {
			t.Error(err)
		}
	})
	return c, w, buf
}

// put stores a raw value, as a client that does not validate would, and
// waits until w applied it.
func (e env) put(t *testing.T, w *hooknats.Watcher, key, value string) {
	t.Helper()
	rev, err := e.kv.Put(ctx(t), key, []byte(value))
	if err != nil {
		t.Fatal(err)
	}
	if err := w.WaitRevision(ctx(t), rev); err != nil {
		t.Fatal(err)
	}
}

func callOf(name string) *hook.ToolCallInput {
	return &hook.ToolCallInput{Turn: turn(nil), Call: events.ToolCall{ID: "c1", Name: name, Input: json.RawMessage(`{}`)}}
}

// docs/protocol.md §7 "Registration": a fail_closed guard whose matcher
// does not compile refuses every call of its event (it cannot tell which
// it guards), each call's decision names the field, and the watcher logs
// it once for the value, not once per call.
func TestBrokenMatcherFailClosedRefusesEveryCall(t *testing.T) {
	e := start(t)
	c, w, logs := e.watchLogged(t)
	serve(t, e.nc, "test.hook.guard", bareJSON, func(events.HookRequest) *events.HookResponse {
		t.Error("a broken registration was asked")
		return &events.HookResponse{Result: events.HookContinue}
	})
	e.put(t, w, "guard", `{"name":"guard","event":"before_tool_call","matcher":"(","subject":"test.hook.guard","failure":"fail_closed"}`)

	for _, tool := range []string{"echo", "anything_else"} {
		rec := &hooktest.Recorder{}
		in := callOf(tool)
		in.Turn.Observer = rec
		out := c.RunBeforeToolCall(ctx(t), in)
		if !out.Failed || out.Result.Action != hook.ToolAbort || out.Hook != "guard" {
			t.Fatalf("%s: outcome %+v, want the call refused by guard", tool, out)
		}
		ds := rec.Decisions()
		if len(ds) != 1 || !ds[0].Failed || !strings.Contains(ds[0].Reason, `"matcher"`) || !strings.Contains(ds[0].Reason, "regular expression") {
			t.Fatalf("%s: decisions %+v, want one failed decision naming the matcher", tool, ds)
		}
	}
	if n := strings.Count(logs.String(), "broken registration"); n != 1 || !strings.Contains(logs.String(), "hook=guard") ||
		!strings.Contains(logs.String(), "matcher") {
		t.Errorf("logged %d times, want once naming the hook and the field:\n%s", n, logs)
	}

	// Fixing the value makes it an ordinary guard again.
	e.put(t, w, "guard", `{"name":"guard","event":"before_tool_call","matcher":"^echo$","subject":"test.hook.nobody","failure":"fail_closed"}`)
	if out := c.RunBeforeToolCall(ctx(t), callOf("other")); out.Stopped() {
		t.Errorf("a fixed guard still refuses calls it does not match: %+v", out)
	}
}

// A broken fail_open registration fails each call it runs at and the
// turn goes on; the failure is reported and logged.
func TestBrokenMatcherFailOpenGoesOn(t *testing.T) {
	e := start(t)
	c, w, logs := e.watchLogged(t)
	e.put(t, w, "audit", `{"name":"audit","event":"before_tool_call","matcher":"[","subject":"test.hook.audit","failure":"fail_open"}`)
	rec := &hooktest.Recorder{}
	in := callOf("echo")
	in.Turn.Observer = rec
	if out := c.RunBeforeToolCall(ctx(t), in); out.Stopped() {
		t.Fatalf("outcome %+v, want the call to go on", out)
	}
	if ds := rec.Decisions(); len(ds) != 1 || !ds[0].Failed || ds[0].Result != events.HookContinue {
		t.Errorf("decisions %+v, want one failed continue", ds)
	}
	if !strings.Contains(logs.String(), "broken registration") || !strings.Contains(logs.String(), "hook=audit") {
		t.Errorf("not logged:\n%s", logs)
	}
}

// A value whose event is no hook point cannot guard anything: it is
// logged and listed as broken, and no hook point fails because of it.
func TestBrokenEventIsLoggedAndListed(t *testing.T) {
	e := start(t)
	c, w, logs := e.watchLogged(t)
	e.put(t, w, "typo", `{"name":"typo","event":"before_tool","subject":"test.hook.typo","failure":"fail_closed"}`)
	e.put(t, w, "badmatch", `{"name":"badmatch","event":"after_tool_call","matcher":"(","subject":"test.hook.b"}`)
	e.register(t, w, reg("fine", events.HookOnAbort, "test.hook.fine"))
	if out := c.RunBeforeToolCall(ctx(t), callOf("echo")); out.Stopped() {
		t.Errorf("outcome %+v", out)
	}
	if !strings.Contains(logs.String(), "hook=typo") || !strings.Contains(logs.String(), "guards nothing") {
		t.Errorf("not logged:\n%s", logs)
	}
	entries, err := hooknats.List(ctx(t), e.kv)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, en := range entries {
		names = append(names, en.Name)
		switch en.Name {
		case "typo":
			if !errors.Is(en.Err, hooknats.ErrInvalidRegistration) || !strings.Contains(en.Err.Error(), `"event"`) || !strings.Contains(en.Err.Error(), `"before_tool"`) {
				t.Errorf("typo: err %v, want one naming the event", en.Err)
			}
		case "badmatch":
			if !errors.Is(en.Err, hooknats.ErrInvalidRegistration) || !strings.Contains(en.Err.Error(), `"matcher"`) {
				t.Errorf("badmatch: err %v, want one naming the matcher", en.Err)
			}
		case "fine":
			if en.Err != nil {
				t.Errorf("fine: err %v", en.Err)
			}
		}
	}
	if want := []string{"badmatch", "fine", "typo"}; !slices.Equal(names, want) {
		t.Errorf("List %q, want %q (run order, unknown events last)", names, want)
	}
}

// The register API refuses what the watcher would have to treat as
// broken, naming the field.
func TestRegisterRefusesBrokenRegistrations(t *testing.T) {
	e := start(t)
	for _, tc := range []struct {
		reg   events.HookRegistration
		field string
	}{
		{events.HookRegistration{Name: "g", Event: events.HookBeforeToolCall, Matcher: "(", Subject: "s"}, `"matcher"`},
		{events.HookRegistration{Name: "g", Event: "before_tool", Subject: "s"}, `"event"`},
		{events.HookRegistration{Name: "g", Event: events.HookBeforeToolCall, Subject: "s", Failure: "fail_closd"}, `"failure"`},
	} {
		_, err := hooknats.Register(ctx(t), e.kv, tc.reg)
		if !errors.Is(err, hooknats.ErrInvalidRegistration) || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("Register(%+v) = %v, want an error naming %s", tc.reg, err, tc.field)
		}
	}
	if entries, err := hooknats.List(ctx(t), e.kv); err != nil || len(entries) != 0 {
		t.Errorf("stored %+v, %v", entries, err)
	}
}
