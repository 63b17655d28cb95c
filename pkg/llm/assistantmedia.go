package llm

import (
	"strconv"

	"github.com/llmworker/llmworker/pkg/events"
)

// AssistantMediaLead leads the images and files of an assistant message
// in the user turn after it (MoveAssistantMedia).
const AssistantMediaLead = "[images and files of the assistant's message above]"

// AssistantMediaNote is the text of an assistant message whose content
// was images and files only, once MoveAssistantMedia moved them: every
// API wants an assistant turn to say something.
const AssistantMediaNote = "[the images and files of this message follow in a user message]"

// MoveAssistantMedia rearranges a transcript for an API whose assistant
// messages hold no images or files, as a tool message of Chat Completions
// holds none: the image and file parts of an assistant message go, led by
// a text part AssistantMediaLead, into the user turn right after it. That
// is the next message when it is a user or tool message, the media placed
// after its leading tool_result parts (an API wants the results of the
// assistant's calls first), else a new user message. The assistant
// message keeps its other parts in order; one left with no text,
// tool_use or tool_result part gets the text AssistantMediaNote.
//
// msgs is not modified; a transcript without assistant media is returned
// as it is. The Fields name each part of the result as msgs had it, so
// that an adapter's errors name the request's fields.
func MoveAssistantMedia(msgs []events.Message) ([]events.Message, Fields) {
	if !hasAssistantMedia(msgs) {
		return msgs, Fields{}
	}
	out := make([]events.Message, 0, len(msgs)+1)
	var f Fields
	for i := 0; i < len(msgs); i++ {
		m := msgs[i]
		if m.Role != events.RoleAssistant || !hasMedia(m.Content) {
			out = append(out, m)
			f.add(i, identity(i, len(m.Content)))
			continue
		}
		kept := m
		kept.Content = nil
		var keptAt []origin
		moved := []events.Part{events.TextPart(AssistantMediaLead)}
		var movedAt []origin
		said := false
		for j, p := range m.Content {
			if p.IsMedia() {
				if len(movedAt) == 0 {
					movedAt = append(movedAt, origin{i, j}) // the lead
				}
				moved = append(moved, p)
				movedAt = append(movedAt, origin{i, j})
				continue
			}
			kept.Content = append(kept.Content, p)
			keptAt = append(keptAt, origin{i, j})
			said = said || p.Type == events.PartToolUse || p.Type == events.PartToolResult || (p.Type == events.PartText && p.Text != "")
		}
		if !said {
			kept.Content = append(kept.Content, events.TextPart(AssistantMediaNote))
			keptAt = append(keptAt, movedAt[0])
		}
		out = append(out, kept)
		f.add(i, keptAt)
		if i+1 == len(msgs) || (msgs[i+1].Role != events.RoleUser && msgs[i+1].Role != events.RoleTool) {
			out = append(out, events.Message{Role: events.RoleUser, Content: moved})
			f.add(i, movedAt)
			continue
		}
		// The next message takes the media after its tool results.
		i++
		next := msgs[i]
		at := identity(i, len(next.Content))
		k := 0
		for k < len(next.Content) && next.Content[k].Type == events.PartToolResult {
			k++
		}
		content := make([]events.Part, 0, len(next.Content)+len(moved))
		content = append(append(append(content, next.Content[:k]...), moved...), next.Content[k:]...)
		next.Content = content
		out = append(out, next)
		f.add(i, append(append(at[:k:k], movedAt...), at[k:]...))
	}
	return out, f
}

func hasAssistantMedia(msgs []events.Message) bool {
	for i := range msgs {
		if msgs[i].Role == events.RoleAssistant && hasMedia(msgs[i].Content) {
			return true
		}
	}
	return false
}

func hasMedia(parts []events.Part) bool {
	for i := range parts {
		if parts[i].IsMedia() {
			return true
		}
	}
	return false
}

// origin is the place of a part in the request: message and part index.
type origin struct{ msg, part int }

func identity(i, n int) []origin {
	at := make([]origin, n)
	for j := range at {
		at[j] = origin{i, j}
	}
	return at
}

// Fields names the messages and parts of a transcript MoveAssistantMedia
// returned by their place in the request. The zero Fields is of a
// transcript as the request had it.
type Fields struct {
	msg  []int      // msg[i]: the request's index of message i
	part [][]origin // part[i][j]: where part j of message i was
}

func (f *Fields) add(i int, at []origin) {
	f.msg = append(f.msg, i)
	f.part = append(f.part, at)
}

// Message is the field of message i: "messages[i]" of the request. A
// user message MoveAssistantMedia added is named after the assistant
// message whose media it holds.
func (f Fields) Message(i int) string {
	if i < len(f.msg) {
		i = f.msg[i]
	}
	return "messages[" + strconv.Itoa(i) + "]"
}

// Part is the field of part j of message i: "messages[i].content[j]" of
// the request, where the part was before it moved.
func (f Fields) Part(i, j int) string {
	if i < len(f.part) && j < len(f.part[i]) {
		o := f.part[i][j]
		i, j = o.msg, o.part
	}
	return "messages[" + strconv.Itoa(i) + "].content[" + strconv.Itoa(j) + "]"
}
