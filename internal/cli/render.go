package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/turn"
)

// ANSI styles; empty when colours are off.
const (
	ansiDim   = "\x1b[2m"
	ansiBold  = "\x1b[1m"
	ansiRed   = "\x1b[31m"
	ansiCyan  = "\x1b[36m"
	ansiReset = "\x1b[0m"
)

// State is where a rendered turn is.
type State int

const (
	StateRunning State = iota
	StatePaused
	StateCompleted
	StateFailed
	StateAborted
)

// Terminal reports whether the turn ended.
func (s State) Terminal() bool { return s >= StateCompleted }

// Rendered is what Render learnt from one event.
type Rendered struct {
	TurnID string
	State  State
	// Paused is set with StatePaused.
	Paused *events.TurnPaused
	// Reason is the reason of a failed or aborted turn.
	Reason string
}

// Renderer turns worker events into the text a person reads: text as it
// streams, thinking dimmed, tool calls with their arguments, progress and
// results, hook decisions, usage at the end.
type Renderer struct {
	w     io.Writer
	color bool
	// Headers prints a line when a new turn starts (tail shows several).
	Headers bool
	// MaxResult truncates tool results and arguments (0 = 300 runes).
	MaxResult int

	midLine  bool            // the cursor is not at the start of a line
	thinking map[string]bool // open thinking blocks (step/index)
	turn     string
	usage    *events.UsageEvent
	model    string // the model of the turn's last model call
}

// NewRenderer writes to w, with ANSI styles when color is true.
func NewRenderer(w io.Writer, color bool) *Renderer {
	return &Renderer{w: w, color: color, thinking: map[string]bool{}}
}

func (r *Renderer) style(code, s string) string {
	if !r.color || s == "" {
		return s
	}
	return code + s + ansiReset
}

func (r *Renderer) write(s string) {
	if s == "" {
		return
	}
	_, _ = io.WriteString(r.w, s)
	r.midLine = !strings.HasSuffix(s, "\n")
}

// line writes s on a line of its own.
func (r *Renderer) line(s string) {
	if r.midLine {
		r.write("\n")
	}
	r.write(s + "\n")
}

func (r *Renderer) limit() int {
	if r.MaxResult <= 0 {
		return 300
	}
	return r.MaxResult
}

// Truncate shortens s to n runes on one line, saying how much was cut.
func Truncate(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	rs := []rune(s)
	return string(rs[:n]) + "… (" + strconv.Itoa(len(rs)-n) + " more chars)"
}

// indentJSON is b indented for a person (b as it is when it is not JSON).
func indentJSON(b json.RawMessage) string {
	var out bytes.Buffer
	if json.Indent(&out, b, "", "  ") != nil {
		return string(b)
	}
	return out.String()
}

func compactJSON(b json.RawMessage) string {
	if len(b) == 0 {
		return "{}"
	}
	var v any
	if json.Unmarshal(b, &v) != nil {
		return string(b)
	}
	out, _ := json.Marshal(v)
	return string(out)
}

// Render decodes and renders one worker event (see RenderEvent).
func (r *Renderer) Render(e *events.Envelope) (Rendered, error) {
	ev, err := events.DecodeWorkerEnvelope(e)
	if errors.Is(err, events.ErrUnknownType) {
		ev, err = nil, nil
	}
	if err != nil {
		return Rendered{TurnID: e.TurnID}, err
	}
	return r.RenderEvent(e, ev), nil
}

// RenderEvent renders the worker event ev of envelope e, switching on its
// Go type (events.WorkerEvent); a nil ev (another kind of event) shows
// nothing.
func (r *Renderer) RenderEvent(e *events.Envelope, ev events.WorkerEvent) Rendered {
	out := Rendered{TurnID: e.TurnID}
	if out.TurnID == "" {
		out.TurnID = e.Subject
	}
	// A turn.started prints its own header, with the model.
	if _, started := ev.(events.TurnStarted); r.Headers && out.TurnID != "" && out.TurnID != r.turn && !started {
		r.header(out.TurnID, e.SessionID, "")
	}
	if out.TurnID != r.turn {
		r.usage = nil // another turn: its usage is not the last one's
	}
	r.turn = out.TurnID
	blockKey := func(step, index int) string { return strconv.Itoa(step) + "/" + strconv.Itoa(index) }
	switch d := ev.(type) {
	case events.TurnStarted:
		r.usage, r.model = nil, d.Model
		if r.Headers {
			r.header(d.TurnID, d.SessionID, d.Model)
		}
		if d.Resumed {
			r.line(r.style(ansiDim, "(turn resumed from its checkpoint)"))
		}
	case events.TurnStep:
		switch {
		case d.Model != "" && r.model != "" && d.Model != r.model:
			r.line(r.style(ansiDim, fmt.Sprintf("↪ step %d: falling back from %s to %s", d.Step, r.model, d.Model)))
		case d.Attempt > 1:
			r.line(r.style(ansiDim, fmt.Sprintf("↻ step %d: retrying the model call (attempt %d)", d.Step, d.Attempt)))
		}
		if d.Model != "" {
			r.model = d.Model
		}
	case events.WorkerBlockStart:
		switch d.BlockType {
		case events.BlockThinking:
			r.thinking[blockKey(d.Step, d.Index)] = true
			if r.midLine {
				r.write("\n")
			}
			r.write(r.style(ansiDim, "thinking: "))
		case events.BlockText:
			if r.midLine {
				r.write("\n")
			}
		}
	case events.WorkerBlockDelta:
		switch d.Kind {
		case events.DeltaThinking:
			r.write(r.style(ansiDim, d.Content))
		case events.DeltaText:
			r.write(d.Content)
		}
	case events.WorkerBlockStop:
		delete(r.thinking, blockKey(d.Step, d.Index))
		if d.BlockType != events.BlockToolUse && r.midLine {
			r.write("\n")
		}
	case events.WorkerBlockAbort:
		delete(r.thinking, blockKey(d.Step, d.Index))
		r.line(r.style(ansiDim, "[block cut off: "+d.Reason+"]"))
	case events.ToolCallComplete:
		s := "→ " + r.style(ansiBold, d.Name) + " " + Truncate(compactJSON(d.Input), r.limit())
		if d.Error != "" {
			s += r.style(ansiRed, "  (invalid input: "+d.Error+")")
		}
		r.line(s)
	case events.ToolStarted:
		r.line(r.style(ansiDim, "  … "+d.Name+" running"))
	case events.ToolProgress:
		s := "  … " + d.Name + " " + strconv.FormatFloat(d.Progress, 'f', -1, 64)
		if d.Total > 0 {
			s += "/" + strconv.FormatFloat(d.Total, 'f', -1, 64)
		}
		if d.Message != "" {
			s += ": " + d.Message
		}
		r.line(r.style(ansiDim, s))
	case events.ToolCallResult:
		head := fmt.Sprintf("  ← %s (%d ms): ", d.Name, d.DurationMS)
		if d.IsError {
			r.line(r.style(ansiRed, fmt.Sprintf("  ✗ %s failed (%d ms): ", d.Name, d.DurationMS)) + Truncate(d.Content, r.limit()))
		} else {
			r.line(head + Truncate(d.Content, r.limit()))
		}
	case events.ToolSkipped:
		by := ""
		if d.Hook != "" {
			by = " by hook " + d.Hook
		}
		r.line(r.style(ansiRed, "  ⊘ "+d.Name+" skipped"+by+": ") + d.Reason)
	case events.ToolCancelled:
		r.line(r.style(ansiDim, "  ⊘ "+d.Name+" cancelled: "+d.Reason))
	case events.ToolChild:
		// A sub-agent's child turn; its own events, when followed, are
		// rendered indented under this line (children.go).
		who := d.Name
		if d.Agent != "" {
			who = d.Agent
		}
		s := "  ↳ sub-agent " + who + " (turn " + d.ChildTurnID + "): " + string(d.Status)
		if d.Code != "" {
			s += " [" + d.Code + "]"
		}
		r.line(r.style(ansiCyan, s))
		for _, c := range d.Pending {
			r.line("     " + c.ID + "  " + c.Name + " " + Truncate(compactJSON(c.Input), r.limit()))
		}
		if d.Status == events.ChildPaused && len(d.Pending) > 0 {
			r.line(r.style(ansiDim, "     settle it with `llmworker turn resume "+d.ChildTurnID+" --approve ID` (or --deny, --edit, --approve-all)"))
		}
	case events.HookDecision:
		s := fmt.Sprintf("  ⚑ hook %s (%s) → %s", d.Hook, d.Event, d.Result)
		if d.Reason != "" {
			s += ": " + d.Reason
		}
		if d.Failed {
			s += " [hook failed]"
		}
		s += fmt.Sprintf(" (%.1f ms)", d.MS)
		if d.Result == events.HookContinue || d.Result == events.HookFinish {
			s = r.style(ansiDim, s)
		} else {
			s = r.style(ansiCyan, s)
		}
		r.line(s)
	case events.HookMessage:
		for _, m := range d.Messages {
			if t := m.Text(); t != "" {
				r.line(r.style(ansiCyan, "  ⚑ "+d.Hook+": ") + t)
			}
		}
	case events.UsageReport:
		t := d.Total
		r.usage = &t
	case events.TurnPaused:
		s := "⏸ turn paused: " + d.Reason
		if d.Hook != "" {
			s += " (hook " + d.Hook + ")"
		}
		r.line(r.style(ansiCyan, s))
		for _, c := range d.Pending {
			r.line("   " + c.ID + "  " + c.Name + " " + Truncate(compactJSON(c.Input), r.limit()))
		}
		out.State, out.Paused = StatePaused, &d
	case events.TurnQueued:
		s := "… waiting for the provider's limits"
		if d.Position > 0 {
			s += fmt.Sprintf(" (position %d)", d.Position)
		}
		r.line(r.style(ansiDim, s))
	case events.TurnCompacted:
		what := "compacted"
		if strings.Contains(d.Policy, "summary") {
			what = "summarized"
		}
		r.line(r.style(ansiDim, fmt.Sprintf("── earlier messages %s (%s: ~%d → ~%d tokens) ──", what, d.Policy, d.TokensBefore, d.TokensAfter)))
	case events.TurnWarning:
		for _, w := range d.Warnings {
			r.line(r.style(ansiDim, "  ⚠ "+w.Setting+" not sent: ") + w.Message)
		}
	case events.TurnResumed:
		var parts []string
		for id, dec := range d.Decisions {
			parts = append(parts, id+"="+string(dec.Kind))
		}
		r.line(r.style(ansiCyan, "▶ turn resumed "+strings.Join(sorted(parts), " ")))
	case events.TurnCompleted:
		u := d.Usage
		if isZeroUsage(u) && r.usage != nil {
			u = *r.usage
		}
		s := "✓ completed"
		if d.StopReason != "" && d.StopReason != events.StopEndTurn {
			s += " (" + string(d.StopReason) + ")"
		}
		if us := FormatUsage(u); us != "" {
			s += " · " + us
		}
		if len(d.Output) > 0 {
			r.line(r.style(ansiBold, "output:") + " " + indentJSON(d.Output))
		}
		r.line(r.style(ansiDim, s))
		out.State = StateCompleted
	case events.TurnFailed:
		out.State, out.Reason = StateFailed, d.Reason
		r.ended("failed", events.TurnEnded(d))
	case events.TurnAborted:
		out.State, out.Reason = StateAborted, d.Reason
		r.ended("aborted", events.TurnEnded(d))
	}
	return out
}

// renderItem renders what a follower read, or a line saying why it was
// skipped; ok is false when it was.
func renderItem(r *Renderer, it turn.Item) (Rendered, bool) {
	switch {
	case it.Env == nil:
		r.line(r.style(ansiRed, "(skipped an undecodable event: "+it.Err.Error()+")"))
		return Rendered{}, false
	case it.Err != nil:
		r.line(r.style(ansiRed, "(skipped "+it.Env.Type+": "+it.Err.Error()+")"))
		return Rendered{}, false
	}
	return r.RenderEvent(it.Env, it.Event), true
}

// ended renders the end of a failed or aborted turn.
func (r *Renderer) ended(word string, d events.TurnEnded) {
	s := "✗ turn " + word + ": " + d.Reason
	if d.Code != "" {
		s += " [" + d.Code + "]"
	}
	if r.usage != nil {
		if us := FormatUsage(*r.usage); us != "" {
			s += " · " + us
		}
	}
	r.line(r.style(ansiRed, s))
}

func (r *Renderer) header(turnID, sessionID, model string) {
	s := "── turn " + turnID
	if sessionID != "" && sessionID != events.NoSession {
		s += " · session " + sessionID
	}
	if model != "" {
		s += " · " + model
	}
	r.line(r.style(ansiBold, s+" ──"))
}

func isZeroUsage(u events.UsageEvent) bool {
	return u.InputTokens == nil && u.OutputTokens == nil && u.TotalTokens == nil
}

// FormatUsage renders token counts ("" when nothing is known).
func FormatUsage(u events.UsageEvent) string {
	var parts []string
	add := func(p *int64, what string) {
		if p != nil {
			parts = append(parts, strconv.FormatInt(*p, 10)+" "+what)
		}
	}
	add(u.InputTokens, "input")
	add(u.OutputTokens, "output")
	add(u.ReasoningTokens, "reasoning")
	if u.CacheReadInputTokens != nil && *u.CacheReadInputTokens > 0 {
		add(u.CacheReadInputTokens, "cached input")
	}
	if len(parts) == 0 {
		add(u.TotalTokens, "total")
	}
	if len(parts) == 0 {
		return ""
	}
	return "usage: " + strings.Join(parts, ", ") + " tokens"
}
