package compact

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/llm"
)

// ReadResultTool is the name of the worker's built-in tool that reads an
// offloaded or cleared tool result (pkg/worker): its input is
// {"call_id", "offset", "length"}.
const ReadResultTool = "read_result"

// view is the current projection, cut into units: the active
// compaction's messages (head) and the originals from position from.
type view struct {
	msgs    []events.Message
	headLen int
	from    int
	units   []unit
	est     Estimator
}

// unit is a run of messages that no compaction splits: a user message,
// or an assistant message with the tool messages that follow it (the
// results of its calls, parallel ones included). keep: the unit is never
// compacted away (pinned, a call Input.Keep names, or orphaned).
type unit struct {
	start, end int
	keep       bool
}

func newView(head, rest []events.Message, from int, keep func(string) bool, est Estimator) *view {
	msgs := make([]events.Message, 0, len(head)+len(rest))
	msgs = append(append(msgs, head...), rest...)
	// A provider-native compaction block is read by its provider alone:
	// a compaction of the tiers leaves it out, message by message (the
	// positions stay).
	for i := range msgs {
		if llm.HasNativeCompaction(&msgs[i]) {
			m := msgs[i]
			m.Content = make([]events.Part, 0, len(m.Content)-1)
			for j := range msgs[i].Content {
				if _, ok := llm.NativeCompactionData(&msgs[i].Content[j]); !ok {
					m.Content = append(m.Content, msgs[i].Content[j])
				}
			}
			msgs[i] = m
		}
	}
	v := &view{msgs: msgs, headLen: len(head), from: from, est: est}
	for i := 0; i < len(msgs); {
		u := unit{start: i}
		for i++; i < len(msgs) && msgs[i].Role == events.RoleTool; i++ {
		}
		u.end = i
		u.keep = v.mustKeep(u, keep)
		v.units = append(v.units, u)
	}
	return v
}

// mustKeep: a pinned message, a call keep names, or a call whose result
// (or a result whose call) is not in the unit.
func (v *view) mustKeep(u unit, keep func(string) bool) bool {
	uses := map[string]bool{}
	for _, m := range v.msgs[u.start:u.end] {
		if m.Pinned {
			return true
		}
		for _, p := range m.Content {
			switch p.Type {
			case events.PartToolUse:
				if keep != nil && keep(p.ID) {
					return true
				}
				uses[p.ID] = false
			case events.PartToolResult:
				if answered, ok := uses[p.ToolUseID]; !ok || answered {
					return true
				}
				uses[p.ToolUseID] = true
			}
		}
	}
	for _, answered := range uses {
		if !answered {
			return true
		}
	}
	return false
}

// position is the transcript position of msgs[i], i >= headLen.
func (v *view) position(i int) int { return v.from + i - v.headLen }

// cuts returns where a compaction may end, best first: the latest unit
// start that leaves at least keepRecent tokens after it, then the start
// of the last unit (the least a compaction can leave). A cut is a unit
// start within the originals (or the head's end, which recompacts only
// the head), and never the start of the first unit.
func (v *view) cuts(keepRecent int64) []int {
	var cand []int
	for _, u := range v.units {
		if u.start > 0 && u.start >= v.headLen {
			cand = append(cand, u.start)
		}
	}
	if len(cand) == 0 {
		return nil
	}
	primary := cand[0]
	var acc int64
	next := len(v.msgs)
	for i := len(cand) - 1; i >= 0; i-- {
		acc += v.est(v.msgs[cand[i]:next])
		next = cand[i]
		if acc >= keepRecent {
			primary = cand[i]
			break
		}
	}
	last := cand[len(cand)-1]
	if last == primary {
		return []int{primary}
	}
	return []int{primary, last}
}

// kept reports whether msgs[i] belongs to a kept unit.
func (v *view) kept(i int) bool {
	for _, u := range v.units {
		if i >= u.start && i < u.end {
			return u.keep
		}
	}
	return false
}

// keptOf returns the messages of the kept units before cut, as they are.
func (v *view) keptOf(cut int) []events.Message {
	var out []events.Message
	for _, u := range v.units {
		if u.keep && u.end <= cut {
			out = append(out, v.msgs[u.start:u.end]...)
		}
	}
	return out
}

// offload returns msgs[:cut] with every tool result of more than above
// bytes of text, or with image or file parts, replaced by its first preview bytes and a note naming
// ReadResultTool; kept units stay as they are. A result offloaded by an
// earlier compaction is shorter than above, so it stays the same bytes.
func (v *view) offload(cut, above, preview int) []events.Message {
	out := make([]events.Message, cut)
	for i, m := range v.msgs[:cut] {
		out[i] = m
		if m.Role != events.RoleTool || v.kept(i) {
			continue
		}
		var content []events.Part
		for j, p := range m.Content {
			text := p.Content
			if p.Type != events.PartToolResult || len(text) <= above && onlyText(p.Parts) {
				continue
			}
			if content == nil {
				content = append([]events.Part(nil), m.Content...)
			}
			head := prefix(text, preview)
			note := fmt.Sprintf("\n[offloaded: %d of %d bytes shown", len(head), len(text))
			if media := len(p.Parts) - textParts(p.Parts); media > 0 {
				note += ", " + strconv.Itoa(media) + " image or file parts left out"
			}
			note += fmt.Sprintf("; %s with {\"call_id\": %q, \"offset\": %d} returns the rest]", ReadResultTool, p.ToolUseID, len(head))
			content[j] = events.Part{Type: events.PartToolResult, ToolUseID: p.ToolUseID, IsError: p.IsError, Content: head + note}
		}
		if content != nil {
			out[i] = events.Message{Role: m.Role, Content: content}
		}
	}
	return out
}

// clearedNote is the content of a cleared tool result.
func clearedNote(id string) string {
	return fmt.Sprintf("[tool result cleared from the context; %s with {\"call_id\": %q} returns it]", ReadResultTool, id)
}

// clear returns span (msgs[:cut] after offload) with the tool results
// and thinking of every unit that is not kept cleared: a result becomes a
// short note naming ReadResultTool, a thinking part is left out.
func (v *view) clear(span []events.Message, cut int) []events.Message {
	out := make([]events.Message, len(span))
	for i, m := range span {
		out[i] = m
		if v.kept(i) {
			continue
		}
		changed := false
		content := make([]events.Part, 0, len(m.Content))
		for _, p := range m.Content {
			switch {
			case p.Type == events.PartThinking:
				changed = true
				continue
			case p.Type == events.PartToolResult && p.Content != clearedNote(p.ToolUseID):
				p = events.Part{Type: events.PartToolResult, ToolUseID: p.ToolUseID, IsError: p.IsError, Content: clearedNote(p.ToolUseID)}
				changed = true
			}
			content = append(content, p)
		}
		if !changed {
			continue
		}
		if len(content) == 0 {
			content = append(content, events.TextPart("(thinking left out)"))
		}
		out[i] = events.Message{Role: m.Role, Content: content}
	}
	return out
}

// tooLarge is the error of a unit that no compaction may cover (the
// last, or a kept one) and whose largest message alone is more than the
// room: no summary needs to be asked for then.
func (v *view) tooLarge(overhead, room int64, l llm.ModelLimits) error {
	for k, u := range v.units {
		if !u.keep && k != len(v.units)-1 {
			continue
		}
		i, t := v.largest(v.msgs[u.start:u.end])
		if t+overhead > room {
			return overflowf("%s alone (~%d tokens) does not fit %s", v.name(u.start+i), t, roomText(room, l))
		}
	}
	return nil
}

// overflow is the error of a context that cannot be made to fit: it
// names the largest message of the view.
func (v *view) overflow(overhead, room int64, l llm.ModelLimits, why string) error {
	i, t := v.largest(v.msgs)
	return overflowf("the context (~%d tokens) does not fit %s, and %s: its largest message is %s (~%d tokens)",
		overhead+v.est(v.msgs), roomText(room, l), why, v.name(i), t)
}

// overflowAfter is overflow after compaction c: it names the largest
// message c left (its own or the originals after c.To).
func (v *view) overflowAfter(c *events.Compaction, overhead, room int64, l llm.ModelLimits) error {
	cut := v.headLen + c.To - v.from
	proj := append(append([]events.Message(nil), c.Messages...), v.msgs[cut:]...)
	i, t := v.largest(proj)
	name := ""
	switch {
	case i < len(c.Messages) && !strings.Contains(c.Policy, "summary"):
		// Without a summary the span's messages are the view's, offloaded
		// and cleared, one for one.
		name = v.name(i) + ", offloaded and cleared"
	case i < len(c.Messages):
		name = fmt.Sprintf("message %d kept by the compaction (%s; pinned, or an unfinished call)", i, proj[i].Role)
	default:
		name = v.name(cut + i - len(c.Messages))
	}
	if t+overhead > room {
		return overflowf("%s alone (~%d tokens) does not fit %s", name, t, roomText(room, l))
	}
	if !strings.Contains(c.Policy, "summary") {
		return overflowf("the context (~%d tokens after offloading and clearing) does not fit %s without a summary (none was made): the largest message is %s (~%d tokens)",
			overhead+v.est(proj), roomText(room, l), name, t)
	}
	return overflowf("the context (~%d tokens after compaction) does not fit %s: the messages that may not be compacted are too large, the largest is %s (~%d tokens)",
		overhead+v.est(proj), roomText(room, l), name, t)
}

func (v *view) largest(msgs []events.Message) (int, int64) {
	best, bt := 0, int64(-1)
	for i := range msgs {
		if t := v.est(msgs[i : i+1]); t > bt {
			best, bt = i, t
		}
	}
	return best, bt
}

// name names msgs[i] for an error.
func (v *view) name(i int) string {
	if i < v.headLen {
		return fmt.Sprintf("message %d kept by the active compaction (%s)", i, v.msgs[i].Role)
	}
	return fmt.Sprintf("the message at transcript position %d (%s)", v.position(i), v.msgs[i].Role)
}

// prefix is at most n bytes of s, cut at a rune boundary.
func prefix(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

func textParts(parts []events.Part) int {
	n := 0
	for _, p := range parts {
		if p.Type == events.PartText {
			n++
		}
	}
	return n
}

func onlyText(parts []events.Part) bool { return textParts(parts) == len(parts) }
