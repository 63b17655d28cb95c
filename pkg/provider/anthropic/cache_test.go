package anthropic_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/llm"
	"github.com/llmworker/llmworker/pkg/provider/anthropic"
	"github.com/llmworker/llmworker/pkg/provider/providertest"
)

// messageFromEvents builds the assistant message of a step from its
// stream, as a worker does.
func messageFromEvents(evs []events.Event) events.Message {
	var parts []events.Part
	bufs := map[int]*strings.Builder{}
	starts := map[int]events.BlockStart{}
	for _, e := range evs {
		switch e := e.(type) {
		case events.BlockStart:
			starts[e.Index], bufs[e.Index] = e, &strings.Builder{}
		case events.BlockDelta:
			bufs[e.Index].WriteString(e.Content)
		case events.BlockStop:
			st, text := starts[e.Index], bufs[e.Index].String()
			switch st.BlockType {
			case events.BlockText:
				parts = append(parts, events.TextPart(text))
			case events.BlockThinking:
				parts = append(parts, events.ThinkingPart(text, e.Signature))
			case events.BlockToolUse:
				parts = append(parts, events.ToolUsePart(st.ID, st.Name, json.RawMessage(text)))
			}
		}
	}
	return events.Message{Role: events.RoleAssistant, Content: parts}
}

// cacheBlock is one block of a request body in the order the prompt cache
// reads it (tools, system, messages), without its cache_control, and
// whether it carried a breakpoint. size is its length, without a thinking
// block's signature when the measure leaves signatures out.
type cacheBlock struct {
	json       []byte
	size       int
	breakpoint bool
}

// cacheBlocks flattens a Messages API request body. withSignatures false
// leaves thinking signatures out of the sizes: the recorded turn's usage
// shows they are not input tokens (its second request has 109 input
// tokens more than its first, for a thinking block of 237 bytes with a
// 538-byte signature, a tool call and its result).
func cacheBlocks(t *testing.T, body []byte, withSignatures bool) []cacheBlock {
	t.Helper()
	var req struct {
		Tools    []map[string]any `json:"tools"`
		System   []map[string]any `json:"system"`
		Messages []struct {
			Role    string           `json:"role"`
			Content []map[string]any `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		t.Fatal(err)
	}
	var out []cacheBlock
	add := func(prefix string, b map[string]any) {
		_, bp := b["cache_control"]
		delete(b, "cache_control")
		j, _ := json.Marshal(b)
		size := len(prefix) + len(j)
		if sig, ok := b["signature"].(string); ok && !withSignatures {
			size -= len(sig)
		}
		out = append(out, cacheBlock{json: append([]byte(prefix), j...), size: size, breakpoint: bp})
	}
	for _, b := range req.Tools {
		add("tool:", b)
	}
	for _, b := range req.System {
		add("system:", b)
	}
	for i, m := range req.Messages {
		for _, b := range m.Content {
			add(fmt.Sprintf("%d:%s:", i, m.Role), b)
		}
	}
	return out
}

// cachedShare returns the share of cur's bytes that is the prefix prev
// wrote to the cache: cur's blocks up to prev's last breakpoint, when cur
// repeats them exactly.
func cachedShare(prev, cur []cacheBlock) float64 {
	last := -1
	for i, b := range prev {
		if b.breakpoint {
			last = i
		}
	}
	total, cached := 0, 0
	for _, b := range cur {
		total += b.size
	}
	if last < 0 || last >= len(cur) {
		return 0
	}
	for i := 0; i <= last; i++ {
		if !bytes.Equal(prev[i].json, cur[i].json) {
			return 0
		}
		cached += cur[i].size
	}
	return float64(cached) / float64(total)
}

// runRecordedTurn sends the ten requests of a recorded tool loop through
// the adapter to a local server: nine steps answered with the recorded
// thinking + fixed_version call (its id made unique per step), each
// followed by the recorded tool result, and a tenth answered with the
// recorded text. It returns the request bodies the server received.
func runRecordedTurn(t *testing.T, system string, tools []events.ToolDefinition, opts events.ModelOptions) [][]byte {
	t.Helper()
	call := string(providertest.MustLoadFixture(t, "anthropic/thinking-then-tool-use_claude-haiku-4-5.sse"))
	const recordedID = "toolu_01825dXWLSoJwCst1qTsiWdb"
	var script []providertest.Response
	for step := 1; step < 10; step++ {
		body := strings.ReplaceAll(call, recordedID, fmt.Sprintf("toolu_01825dXWLSoJwCst1qTsiW%02d", step))
		script = append(script, providertest.SSE([]byte(body)))
	}
	script = append(script, providertest.SSE(providertest.MustLoadFixture(t, "anthropic/text-after-tool-result_claude-haiku-4-5.sse")))
	srv := providertest.NewServer(t, script...)
	p := newProvider(t, anthropic.Config{BaseURL: srv.URL()})
	req := &llm.Request{Model: "anthropic:claude-haiku-4-5", MaxTokens: 4096, System: system, Tools: tools,
		Thinking:     &events.ThinkingConfig{BudgetTokens: 1024},
		ModelOptions: opts,
		Messages:     []events.Message{events.UserText("Use the fixed_version tool to find out which version this is, tell me, and make a short joke about it.")}}
	for step := 1; step <= 10; step++ {
		evs := providertest.MustRun(t, p, req)
		asst := messageFromEvents(evs)
		req.Messages = append(req.Messages, asst)
		for _, part := range asst.Content {
			if part.Type == events.PartToolUse {
				req.Messages = append(req.Messages, events.Message{Role: events.RoleTool,
					Content: []events.Part{events.ToolResultPart(part.ID, "0.32a0", false)}})
			}
		}
	}
	var bodies [][]byte
	for _, r := range srv.Requests() {
		bodies = append(bodies, r.Body)
	}
	if len(bodies) != 10 {
		t.Fatalf("%d requests, want 10", len(bodies))
	}
	return bodies
}

func agentPreamble(t *testing.T) (string, []events.ToolDefinition) {
	t.Helper()
	system, err := os.ReadFile("testdata/agent-system.txt")
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile("testdata/agent-tools.json")
	if err != nil {
		t.Fatal(err)
	}
	var defs []struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		InputSchema json.RawMessage `json:"input_schema"`
	}
	if err := json.Unmarshal(raw, &defs); err != nil {
		t.Fatal(err)
	}
	var tools []events.ToolDefinition
	for _, d := range defs {
		tools = append(tools, events.ToolDefinition{Name: d.Name, Description: d.Description, InputSchema: d.InputSchema})
	}
	return string(system), tools
}

// Breakpoints by default: the last tool, the system prompt, the newest
// message and the message that was newest one step before, never more
// than four; none with cache false.
func TestCacheBreakpoints(t *testing.T) {
	system, tools := agentPreamble(t)
	bodies := runRecordedTurn(t, system, tools, events.ModelOptions{})
	for step, body := range bodies {
		var req struct {
			Tools    []map[string]any `json:"tools"`
			System   []map[string]any `json:"system"`
			Messages []struct {
				Role    string           `json:"role"`
				Content []map[string]any `json:"content"`
			} `json:"messages"`
		}
		if err := json.Unmarshal(body, &req); err != nil {
			t.Fatal(err)
		}
		var got []string
		for i, b := range req.Tools {
			if _, ok := b["cache_control"]; ok {
				got = append(got, fmt.Sprintf("tools[%d]", i))
			}
		}
		for i, b := range req.System {
			if _, ok := b["cache_control"]; ok {
				got = append(got, fmt.Sprintf("system[%d]", i))
			}
		}
		for i, m := range req.Messages {
			for j, b := range m.Content {
				if cc, ok := b["cache_control"]; ok {
					got = append(got, fmt.Sprintf("messages[%d].content[%d]", i, j))
					if fmt.Sprint(cc) != "map[type:ephemeral]" {
						t.Errorf("step %d: cache_control %v", step+1, cc)
					}
				}
			}
		}
		// Step n sends 2n-1 messages: the task, then an assistant message
		// (thinking, tool_use) and a user message (tool_result) per step.
		n := len(req.Messages)
		want := []string{fmt.Sprintf("tools[%d]", len(tools)-1), "system[0]"}
		if n >= 3 {
			want = append(want, fmt.Sprintf("messages[%d].content[0]", n-3))
		}
		want = append(want, fmt.Sprintf("messages[%d].content[0]", n-1))
		if strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("step %d: breakpoints %v, want %v", step+1, got, want)
		}
		if len(got) > anthropic.MaxBreakpoints {
			t.Errorf("step %d: %d breakpoints", step+1, len(got))
		}
	}

	off := false
	for _, body := range runRecordedTurn(t, system, tools, events.ModelOptions{Cache: &off}) {
		if bytes.Contains(body, []byte("cache_control")) {
			t.Fatalf("cache false: a request carries cache_control: %s", body)
		}
	}
}

// A thinking block cannot carry a breakpoint: the one of its message goes
// on the block before it.
func TestCacheBreakpointSkipsThinking(t *testing.T) {
	req := &llm.Request{Model: "anthropic:claude-haiku-4-5", Messages: []events.Message{
		events.UserText("q"),
		{Role: events.RoleAssistant, Content: []events.Part{events.TextPart("a"), events.ThinkingPart("t", "sig")}},
	}}
	body, _ := sent(t, req)
	checkField(t, body, "messages", jsonOf(t, `[
	 {"role":"user","content":[{"type":"text","text":"q"}]},
	 {"role":"assistant","content":[{"type":"text","text":"a","cache_control":{"type":"ephemeral"}},{"type":"thinking","thinking":"t","signature":"sig"}]}]`))
}

// The share of each request of a recorded ten-step turn that the previous
// request wrote to the prompt cache (docs/benchmarks.md): at least 90%
// from the second step on with an agent's system prompt and tools,
// measured without thinking signatures (see cacheBlocks). Run with -v for
// the figures.
func TestCachedPrefixShare(t *testing.T) {
	system, tools := agentPreamble(t)
	for _, c := range []struct {
		name   string
		system string
		tools  []events.ToolDefinition
		target float64
	}{
		{"agent preamble (system prompt and 9 tools)", system, tools, 0.90},
		{"recorded cassette alone (fixed_version, no system prompt)", "", tools[:1], 0},
	} {
		bodies := runRecordedTurn(t, c.system, c.tools, events.ModelOptions{})
		for _, sigs := range []bool{false, true} {
			var line strings.Builder
			prev := cacheBlocks(t, bodies[0], sigs)
			fmt.Fprintf(&line, "%s, signatures counted %v: step 1 %d B", c.name, sigs, len(bodies[0]))
			for i := 1; i < len(bodies); i++ {
				cur := cacheBlocks(t, bodies[i], sigs)
				share := cachedShare(prev, cur)
				fmt.Fprintf(&line, ", %d: %.1f%%", i+1, 100*share)
				if !sigs && share < c.target {
					t.Errorf("%s: step %d: cached prefix %.1f%%, want at least %.0f%%", c.name, i+1, 100*share, 100*c.target)
				}
				prev = cur
			}
			t.Log(line.String())
		}
	}
}

// Cache reads and writes reported by the API are the usage event's
// cache_read_input_tokens and cache_creation_input_tokens.
func TestCacheUsage(t *testing.T) {
	body := "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"model\":\"claude-haiku-4-5\",\"usage\":{\"input_tokens\":12,\"cache_creation_input_tokens\":310,\"cache_read_input_tokens\":2048,\"output_tokens\":1}}}\n\n" +
		"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n" +
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"ok\"}}\n\n" +
		"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n" +
		"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":2}}\n\n" +
		"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
	srv := providertest.NewServer(t, providertest.SSE([]byte(body)))
	p := newProvider(t, anthropic.Config{BaseURL: srv.URL()})
	got := providertest.Summarize(t, providertest.MustRun(t, p, simpleRequest()))
	u := got.Usage
	if u == nil || !providertest.EqualInt64(u.CacheReadInputTokens, providertest.Int64(2048)) ||
		!providertest.EqualInt64(u.CacheCreationInputTokens, providertest.Int64(310)) ||
		!providertest.EqualInt64(u.InputTokens, providertest.Int64(12)) {
		t.Errorf("usage %s, want input 12, cache read 2048, cache creation 310", providertest.UsageJSON(u))
	}
}
