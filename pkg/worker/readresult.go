package worker

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"unicode/utf8"

	"github.com/llmworker/llmworker/pkg/compact"
	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/tool"
)

// The built-in read_result tool (compact.ReadResultTool): the model reads
// a tool result that a compaction offloaded or cleared, from the
// originals, which are never deleted. It is offered while a compaction of
// the turn is active and the turn has no tool of that name; a call of it
// is answered whenever compaction is on, whatever Config.ToolNames says:
// it reads only the turn's own transcript.

// DefaultReadLength is how many bytes read_result returns when the call
// gives no length.
const DefaultReadLength = compact.DefaultOffloadAbove

// resultSource is what read_result reads: the originals the run holds
// (from position base on) and Config.Originals for those before.
type resultSource struct {
	msgs      []events.Message
	base      int
	originals func(ctx context.Context, from, to int) ([]events.Message, error)
}

type sourceKey struct{}

// publishResults makes the transcript as it is now readable by the
// turn's read_result calls. The messages below its length are never
// written again (the transcript only grows), so a tool goroutine reads
// them while the run appends.
func (r *run) publishResults() {
	if r.source == nil {
		r.source = new(atomic.Pointer[resultSource])
	}
	r.source.Store(&resultSource{msgs: r.st.Messages[:len(r.st.Messages):len(r.st.Messages)], base: r.st.Base, originals: r.cfg.Originals})
}

// withResults puts the run's source into the context its tools run under.
func (r *run) withResults(ctx context.Context) context.Context {
	r.publishResults()
	return context.WithValue(ctx, sourceKey{}, r.source)
}

// offerRead reports whether read_result is offered to the model.
func (r *run) offerRead() bool {
	if r.cfg.Compaction.Off() || r.st.Compaction == nil {
		return false
	}
	_, shadowed := r.cfg.lookupUser(compact.ReadResultTool)
	return !shadowed
}

type readResult struct{}

func (readResult) Name() string { return compact.ReadResultTool }
func (readResult) Description() string {
	return "Read a tool result of this conversation that was shortened or cleared to save context: call_id names the call; offset and length (bytes) select a part of it."
}
func (readResult) InputSchema() json.RawMessage {
	return json.RawMessage(`{"type":"object","properties":{"call_id":{"type":"string","description":"the id of the tool call whose result to read"},"offset":{"type":"integer","minimum":0,"description":"the byte to start at (0: the beginning)"},"length":{"type":"integer","minimum":1,"description":"how many bytes to read (default 8192)"}},"required":["call_id"]}`)
}

// Eager: reading the transcript changes nothing.
func (readResult) Eager() bool { return true }

func (readResult) Execute(ctx context.Context, input json.RawMessage) (string, error) {
	var in struct {
		CallID string `json:"call_id"`
		Offset int    `json:"offset"`
		Length int    `json:"length"`
	}
	if err := json.Unmarshal(input, &in); err != nil {
		return "", badInput("", "must be an object {call_id, offset, length}: "+err.Error())
	}
	switch {
	case in.CallID == "":
		return "", badInput("call_id", "is required")
	case in.Offset < 0:
		return "", badInput("offset", "must not be negative")
	case in.Length < 0:
		return "", badInput("length", "must not be negative")
	}
	if in.Length == 0 {
		in.Length = DefaultReadLength
	}
	p, _ := ctx.Value(sourceKey{}).(*atomic.Pointer[resultSource])
	if p == nil || p.Load() == nil {
		return "", fmt.Errorf("read_result: this run holds no transcript")
	}
	src := p.Load()
	part, ok := findResult(src.msgs, in.CallID)
	if !ok && src.base > 0 && src.originals != nil {
		older, err := src.originals(ctx, 0, src.base)
		if err != nil {
			return "", fmt.Errorf("read_result: reading the transcript before position %d: %w", src.base, err)
		}
		part, ok = findResult(older, in.CallID)
	}
	if !ok {
		return "", badInput("call_id", fmt.Sprintf("no tool result of call %q is in this conversation", in.CallID))
	}
	text := part.Content
	if in.Offset >= len(text) {
		return fmt.Sprintf("[the result of call %s has %d bytes; offset %d is past its end]", in.CallID, len(text), in.Offset), nil
	}
	from := in.Offset
	for from > 0 && !utf8.RuneStart(text[from]) {
		from--
	}
	to := min(from+in.Length, len(text))
	for to < len(text) && !utf8.RuneStart(text[to]) {
		to--
	}
	if to <= from { // a length shorter than the rune at from
		_, size := utf8.DecodeRuneInString(text[from:])
		to = from + size
	}
	return fmt.Sprintf("[bytes %d to %d of %d of the result of call %s]\n%s", from, to, len(text), in.CallID, text[from:to]), nil
}

// findResult finds the tool result of call id, the newest first.
func findResult(msgs []events.Message, id string) (events.Part, bool) {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role != events.RoleTool {
			continue
		}
		for _, p := range msgs[i].Content {
			if p.Type == events.PartToolResult && p.ToolUseID == id {
				return p, true
			}
		}
	}
	return events.Part{}, false
}

func badInput(field, problem string) error {
	return &tool.InvalidArgumentError{Tool: compact.ReadResultTool, Problems: []tool.Problem{{Field: field, Message: problem}}}
}
