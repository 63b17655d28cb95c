package worker

import (
	"slices"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/timeline"
)

// assemble builds the assistant message from the collectors: parts in
// block-index order, thinking with its signature (redacted when only the
// signature came), tool_use with its signature. Calls of provider-run tools
// are left out: they were answered inside the response, and a tool_use
// without a local tool_result would be rejected in the next request.
func (r *run) assemble() (events.Message, []timeline.CollectedCall) {
	origin, _ := events.SplitModel(r.model)
	return assembleFrom(origin, r.texts.TakeBlocks(), r.thinks.TakeCollected(), r.calls.TakeCollected())
}

// assembleFrom is assemble of collected blocks (taken, or copies looked
// at for a span's gen_ai.output.messages): the slices are the caller's
// own, and collected is reused for the calls it returns. origin (the
// provider prefix of the model that answered) marks the parts only that
// provider reads: thinking, and parts with a signature
// (events.Part.Origin).
func assembleFrom(origin string, texts []timeline.CollectedText, thinks []timeline.CollectedThinking, collected []timeline.CollectedCall) (events.Message, []timeline.CollectedCall) {
	n := len(texts) + len(thinks) + len(collected)
	content := make([]events.Part, 0, n)
	var small [16]int
	index := small[:0] // content[i]'s block index
	if n > len(small) {
		index = make([]int, 0, n)
	}
	for _, b := range texts {
		content = append(content, events.Part{Type: events.PartText, Text: b.Text, Signature: b.Signature, Origin: signed(origin, b.Signature)})
		index = append(index, b.Index)
	}
	for _, b := range thinks {
		content = append(content, events.Part{Type: events.PartThinking, Thinking: b.Thinking,
			Signature: b.Signature, Redacted: b.Thinking == "" && b.Signature != "", Origin: origin})
		index = append(index, b.Index)
	}
	calls := collected[:0]
	for _, c := range collected {
		if c.Server {
			continue
		}
		calls = append(calls, c)
		content = append(content, events.Part{Type: events.PartToolUse, ID: c.ID, Name: c.Name,
			Input: c.Input, Signature: c.Signature, Origin: signed(origin, c.Signature)})
		index = append(index, c.Index)
	}
	// A stable insertion sort of both by block index: the parts are few
	// and almost always in order already.
	for i := 1; i < len(content); i++ {
		for j := i; j > 0 && index[j-1] > index[j]; j-- {
			index[j-1], index[j] = index[j], index[j-1]
			content[j-1], content[j] = content[j], content[j-1]
		}
	}
	slices.SortStableFunc(calls, func(a, b timeline.CollectedCall) int { return a.Index - b.Index })
	if len(calls) == 0 {
		calls = nil
	}
	return events.Message{Role: events.RoleAssistant, Content: content}, calls
}

// signed is origin for a part with a signature, else "".
func signed(origin, signature string) string {
	if signature == "" {
		return ""
	}
	return origin
}

// turnEnd runs on_turn_end after a response without tool calls, once
