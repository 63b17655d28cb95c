package compact

import (
	"context"
	"fmt"
	"strings"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/llm"
)

// SummarySystem is the system prompt of the summarizer's calls.
const SummarySystem = `You compact the history of a conversation between a user, an AI assistant and the tools the assistant called, so that the assistant can go on without it. Write a summary of what was asked, what was done, the tool calls made and what they found (their call ids, which the assistant can read in full with the read_result tool), decisions taken, and what is still open. Keep names, numbers, paths and identifiers exact. Answer with the summary only.`

// summaryIntro starts the summary message the model reads.
const summaryIntro = "[Summary of the conversation before transcript position %d, written by %s to save context; the original messages are kept, and %s returns any tool result it names in full.]\n\n"

// summarize summarizes the units of span (msgs[:cut], offloaded) that
// are not kept, folding chunks when they are larger than the
// summarizer's input room: each call gets the summary so far and the
// next chunk. It returns the summary message (nil when the span holds
// kept units only) and the calls' usage.
func (p *Policy) summarize(ctx context.Context, v *view, span []events.Message, cut, to int, model string, limits llm.ModelLimits) (*events.Message, events.UsageEvent, error) {
	var usage events.UsageEvent
	var texts []string
	for _, u := range v.units {
		if u.keep || u.end > cut {
			continue
		}
		texts = append(texts, render(span[u.start:u.end]))
	}
	if len(texts) == 0 {
		return nil, usage, nil
	}
	maxOut := or(p.Config.SummaryMaxTokens, DefaultSummaryMaxTokens)
	if limits.MaxOutputTokens > 0 {
		maxOut = min(maxOut, int(limits.MaxOutputTokens))
	}
	budget := int64(0) // 0: unbounded
	if limits.ContextWindow > 0 {
		// The window holds the system prompt, the summary so far (at
		// most maxOut), the chunk, the framing and the output.
		budget = limits.ContextWindow - int64(2*maxOut) - or(p.Config.Reserve, llm.DefaultReserve(limits)) - EstimateText(v.est, SummarySystem) - 64
		if budget <= 0 {
			return nil, usage, fmt.Errorf("%w: the window of summarizer model %q (%d tokens) leaves no room for input after %d tokens of output",
				ErrSummarizer, model, limits.ContextWindow, maxOut)
		}
	}
	chunks := chunk(texts, budget, v.est)
	summary := ""
	for i, c := range chunks {
		var b strings.Builder
		if summary != "" {
			b.WriteString("The summary of the conversation so far:\n\n" + summary + "\n\nThe conversation goes on:\n\n")
		} else {
			b.WriteString("The conversation:\n\n")
		}
		b.WriteString(c)
		b.WriteString("\n\nWrite the summary of the whole conversation above.")
		text, u, err := p.Summarize(ctx, model, SummarySystem, b.String(), maxOut)
		usage = usage.Add(u)
		if err != nil {
			return nil, usage, fmt.Errorf("%w: call %d of %d on %s: %w", ErrSummarizer, i+1, len(chunks), model, err)
		}
		summary = strings.TrimSpace(text)
	}
	msg := events.UserText(fmt.Sprintf(summaryIntro, to, model, ReadResultTool) + summary)
	return &msg, usage, nil
}

// chunk joins texts into chunks of at most budget tokens (0: one chunk),
// splitting a text larger than that at rune boundaries.
func chunk(texts []string, budget int64, est Estimator) []string {
	if budget <= 0 {
		return []string{strings.Join(texts, "\n")}
	}
	tokens := func(s string) int64 { return EstimateText(est, s) }
	var out []string
	var cur strings.Builder
	for _, t := range texts {
		for _, piece := range split(t, budget, tokens) {
			if cur.Len() > 0 && tokens(cur.String()+"\n"+piece) > budget {
				out = append(out, cur.String())
				cur.Reset()
			}
			if cur.Len() > 0 {
				cur.WriteByte('\n')
			}
			cur.WriteString(piece)
		}
	}
	if cur.Len() > 0 {
		out = append(out, cur.String())
	}
	return out
}

// split cuts s into pieces of at most budget tokens.
func split(s string, budget int64, tokens func(string) int64) []string {
	if tokens(s) <= budget || len(s) < 2 {
		return []string{s}
	}
	mid := len(prefix(s, len(s)/2))
	if mid == 0 {
		mid = len(s) / 2
	}
	return append(split(s[:mid], budget, tokens), split(s[mid:], budget, tokens)...)
}

// render writes messages as the summarizer reads them.
func render(msgs []events.Message) string {
	var b strings.Builder
	for _, m := range msgs {
		for _, p := range m.Content {
			switch p.Type {
			case events.PartText:
				fmt.Fprintf(&b, "[%s] %s\n", m.Role, p.Text)
			case events.PartThinking:
				if p.Thinking != "" {
					fmt.Fprintf(&b, "[%s thinking] %s\n", m.Role, p.Thinking)
				}
			case events.PartToolUse:
				fmt.Fprintf(&b, "[%s calls tool %s, call id %s] %s\n", m.Role, p.Name, p.ID, p.Input)
			case events.PartToolResult:
				status := "result"
				if p.IsError {
					status = "error"
				}
				fmt.Fprintf(&b, "[tool %s of call %s] %s\n", status, p.ToolUseID, p.Content)
			default:
				fmt.Fprintf(&b, "[%s %s %s]\n", m.Role, p.Type, p.MediaType)
			}
		}
	}
	return b.String()
}
