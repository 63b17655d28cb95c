package providertest_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/provider/providertest"
)

func TestStrictWellFormed(t *testing.T) {
	started := events.StatusEvent{Status: events.StatusStarted}
	completed := events.StatusEvent{Status: events.StatusCompleted}
	ok := []events.Event{started,
		events.BlockStart{Index: 0, BlockType: events.BlockText},
		events.BlockDelta{Index: 0, Kind: events.DeltaText, Content: "hi"},
		events.BlockStop{Index: 0, BlockType: events.BlockText},
		completed}
	if err := providertest.StrictWellFormed(ok); err != nil {
		t.Fatalf("well-formed stream rejected: %v", err)
	}
	bad := map[string][]events.Event{
		"empty":            nil,
		"no start status":  ok[1:],
		"no terminal":      ok[:4],
		"block not closed": {started, events.BlockStart{Index: 0, BlockType: events.BlockText}, completed},
		"wrong delta kind": {started, events.BlockStart{Index: 0, BlockType: events.BlockText},
			events.BlockDelta{Index: 0, Kind: events.DeltaThinking, Content: "x"},
			events.BlockStop{Index: 0, BlockType: events.BlockText}, completed},
		"failed without error": {started, events.StatusEvent{Status: events.StatusFailed}},
	}
	for name, evs := range bad {
		if err := providertest.StrictWellFormed(evs); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestSummarize(t *testing.T) {
	evs := []events.Event{
		events.StatusEvent{Status: events.StatusStarted},
		events.BlockStart{Index: 0, BlockType: events.BlockThinking},
		events.BlockDelta{Index: 0, Kind: events.DeltaThinking, Content: "hm"},
		events.BlockStop{Index: 0, BlockType: events.BlockThinking, Signature: "s1"},
		events.BlockStart{Index: 1, BlockType: events.BlockToolUse, ID: "c1", Name: "f"},
		events.BlockDelta{Index: 1, Kind: events.DeltaInputJSON, Content: `{"a":`},
		events.BlockDelta{Index: 1, Kind: events.DeltaInputJSON, Content: `1}`},
		events.BlockStop{Index: 1, BlockType: events.BlockToolUse, StopReason: events.StopReason("tool_use")},
		events.StatusEvent{Status: events.StatusCompleted},
	}
	s := providertest.Summarize(t, evs)
	if s.Thinking != "hm" || len(s.Signatures) != 1 || s.Signatures[0] != "s1" || len(s.AllSignatures) != 1 {
		t.Errorf("thinking %q signatures %q / %q", s.Thinking, s.Signatures, s.AllSignatures)
	}
	if len(s.Calls) != 1 || s.Calls[0].ID != "c1" || s.Calls[0].Name != "f" || s.Calls[0].Input.(map[string]any)["a"] != 1.0 {
		t.Errorf("calls %+v", s.Calls)
	}
	if s.StopReason != "tool_use" || s.Status != events.StatusCompleted {
		t.Errorf("stop %q status %q", s.StopReason, s.Status)
	}
}

func TestFixedClient(t *testing.T) {
	c := providertest.FixedClient([]byte("data: x\n\n"))
	resp, err := c.Post("http://replay.invalid/any", "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" || string(b) != "data: x\n\n" {
		t.Errorf("status %d type %q body %q", resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
}

func TestInt64Helpers(t *testing.T) {
	if !providertest.EqualInt64(nil, nil) || providertest.EqualInt64(nil, providertest.Int64(0)) ||
		!providertest.EqualInt64(providertest.Int64(3), providertest.Int64(3)) {
		t.Error("EqualInt64")
	}
	if providertest.FormatInt64(nil) != "nil" || providertest.FormatInt64(providertest.Int64(7)) != "7" {
		t.Error("FormatInt64")
	}
	if providertest.UsageJSON(nil) != "<nil>" {
		t.Error("UsageJSON(nil)")
	}
}

func TestAssertJSON(t *testing.T) {
	providertest.AssertJSON(t, []byte(`{"b":[1,2],"a":"x"}`), `{ "a": "x", "b": [1, 2] }`)
}
