package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/llmworker/llmworker/pkg/events"
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

// Render renders one worker event. Events it does not know are skipped.
func (r *Renderer) Render(e *events.Envelope) (Rendered, error) {
	out := Rendered{TurnID: e.TurnID}
	if out.TurnID == "" {
		out.TurnID = e.Subject
	}
	if r.Headers && out.TurnID != "" && out.TurnID != r.turn && e.Type != events.TypeTurnStarted {
		r.header(out.TurnID, e.SessionID, "")
	}
	r.turn = out.TurnID
	blockKey := func(step, index int) string { return strconv.Itoa(step) + "/" + strconv.Itoa(index) }
	switch e.Type {
	case events.TypeTurnStarted:
		d, err := events.DecodeData[events.TurnStarted](e)
		if err != nil {
			return out, err
		}
		r.usage = nil
		if r.Headers {
			r.header(d.TurnID, d.SessionID, d.Model)
		}
		if d.Resumed {
			r.line(r.style(ansiDim, "(turn resumed from its checkpoint)"))
		}
	case events.TypeTurnStep:
		d, err := events.DecodeData[events.TurnStep](e)
		if err != nil {
			return out, err
		}
		if d.Attempt > 1 {
			r.line(r.style(ansiDim, fmt.Sprintf("↻ step %d: retrying the model call (attempt %d)", d.Step, d.Attempt)))
		}
	case events.TypeBlockStart:
		d, err := events.DecodeData[events.WorkerBlockStart](e)
		if err != nil {
			return out, err
		}
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
	case events.TypeBlockDelta:
		var d events.WorkerBlockDelta
		if err := json.Unmarshal(e.Data, &d); err != nil {
			return out, err
		}
		switch d.Kind {
		case events.DeltaThinking:
			r.write(r.style(ansiDim, d.Content))
		case events.DeltaText:
			r.write(d.Content)
		}
	case events.TypeBlockStop, events.TypeBlockAbort:
		var d struct {
			Index     int              `json:"index"`
			Step      int              `json:"step"`
			BlockType events.BlockType `json:"block_type"`
			Reason    string           `json:"reason"`
		}
		if err := json.Unmarshal(e.Data, &d); err != nil {
			return out, err
		}
		delete(r.thinking, blockKey(d.Step, d.Index))
		if e.Type == events.TypeBlockAbort {
			r.line(r.style(ansiDim, "[block cut off: "+d.Reason+"]"))
		} else if d.BlockType != events.BlockToolUse && r.midLine {
			r.write("\n")
		}
	case events.TypeToolCallComplete:
		d, err := events.DecodeData[events.ToolCallComplete](e)
		if err != nil {
			return out, err
		}
		s := "→ " + r.style(ansiBold, d.Name) + " " + Truncate(compactJSON(d.Input), r.limit())
		if d.Error != "" {
			s += r.style(ansiRed, "  (invalid input: "+d.Error+")")
		}
		r.line(s)
	case events.TypeToolStarted:
		d, err := events.DecodeData[events.ToolStarted](e)
		if err != nil {
			return out, err
		}
		r.line(r.style(ansiDim, "  … "+d.Name+" running"))
	case events.TypeToolResult:
		d, err := events.DecodeData[events.ToolCallResult](e)
		if err != nil {
			return out, err
		}
		head := fmt.Sprintf("  ← %s (%d ms): ", d.Name, d.DurationMS)
		if d.IsError {
			r.line(r.style(ansiRed, fmt.Sprintf("  ✗ %s failed (%d ms): ", d.Name, d.DurationMS)) + Truncate(d.Content, r.limit()))
		} else {
			r.line(head + Truncate(d.Content, r.limit()))
		}
	case events.TypeToolSkipped:
		d, err := events.DecodeData[events.ToolSkipped](e)
		if err != nil {
			return out, err
		}
		by := ""
		if d.Hook != "" {
			by = " by hook " + d.Hook
		}
		r.line(r.style(ansiRed, "  ⊘ "+d.Name+" skipped"+by+": ") + d.Reason)
	case events.TypeHookDecision:
		d, err := events.DecodeData[events.HookDecision](e)
		if err != nil {
			return out, err
		}
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
	case events.TypeHookMessage:
		d, err := events.DecodeData[events.HookMessage](e)
		if err != nil {
			return out, err
		}
		for _, m := range d.Messages {
			if t := m.Text(); t != "" {
				r.line(r.style(ansiCyan, "  ⚑ "+d.Hook+": ") + t)
			}
		}
	case events.TypeUsage:
		d, err := events.DecodeData[events.UsageReport](e)
		if err != nil {
			return out, err
		}
		t := d.Total
		r.usage = &t
	case events.TypeTurnPaused:
		d, err := events.DecodeData[events.TurnPaused](e)
		if err != nil {
			return out, err
		}
		s := "⏸ turn paused: " + d.Reason
		if d.Hook != "" {
			s += " (hook " + d.Hook + ")"
		}
		r.line(r.style(ansiCyan, s))
		for _, c := range d.Pending {
			r.line("   " + c.ID + "  " + c.Name + " " + Truncate(compactJSON(c.Input), r.limit()))
		}
		out.State, out.Paused = StatePaused, &d
	case events.TypeTurnResumed:
		d, err := events.DecodeData[events.TurnResumed](e)
		if err != nil {
			return out, err
		}
		var parts []string
		for id, dec := range d.Decisions {
			parts = append(parts, id+"="+string(dec.Kind))
		}
		r.line(r.style(ansiCyan, "▶ turn resumed "+strings.Join(sorted(parts), " ")))
	case events.TypeTurnCompleted:
		d, err := events.DecodeData[events.TurnCompleted](e)
		if err != nil {
			return out, err
		}
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
		r.line(r.style(ansiDim, s))
		out.State = StateCompleted
	case events.TypeTurnFailed, events.TypeTurnAborted:
		d, err := events.DecodeData[events.TurnEnded](e)
		if err != nil {
			return out, err
		}
		word := "failed"
		out.State = StateFailed
		if e.Type == events.TypeTurnAborted {
			word, out.State = "aborted", StateAborted
		}
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
		out.Reason = d.Reason
	}
	return out, nil
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
