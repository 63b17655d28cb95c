package llm

import "github.com/llmworker/llmworker/pkg/events"

// ForProvider returns msgs as provider (a model string's prefix, e.g.
// "openai") may read them: the data of a part whose Origin names another
// provider (one of another Origin) is left out, since only the provider
// that made it can read it
// (an Anthropic thinking signature, OpenAI's encrypted reasoning, a
// Gemini thought signature) and another refuses it or misreads it as its
// own. Of such a part:
//
//   - a thinking part is left out;
//   - a text or tool_use part keeps its content without Signature (a
//     tool_use must stay: the tool message after it answers it);
//   - in an assistant message, a tool_result part (a provider-run tool's
//     result block) is left out, with the tool_use it answers;
//   - a message that is left empty is left out.
//
// Parts without an Origin, and parts of provider's Origin, go as they are.
// msgs is not modified: when nothing is left out it is returned as is,
// else a copy with the changed messages copied.
func ForProvider(msgs []events.Message, provider string) []events.Message {
	first := -1
	for i := range msgs {
		if foreignIn(msgs[i].Content, provider) {
			first = i
			break
		}
	}
	if first < 0 {
		return msgs
	}
	out := make([]events.Message, first, len(msgs))
	copy(out, msgs[:first])
	for _, m := range msgs[first:] {
		if !foreignIn(m.Content, provider) {
			out = append(out, m)
			continue
		}
		if m = stripMessage(m, provider); len(m.Content) > 0 {
			out = append(out, m)
		}
	}
	return out
}

// sharedOrigins maps a provider prefix to the prefix whose parts it reads
// as its own. Claude's thinking signatures are valid on the Claude API
// and on Vertex AI alike (Anthropic's extended-thinking documentation:
// signature values are compatible across platforms), so Claude on Vertex
// AI shares the origin "anthropic".
var sharedOrigins = map[string]string{"vertex-anthropic": "anthropic"}

// Origin returns the origin (events.Part.Origin) of the parts a model of
// provider (a model string's prefix) makes: the prefix, or the prefix
// whose data it reads alike ("anthropic" for "vertex-anthropic").
// ForProvider sends a part to every provider of the same Origin.
func Origin(provider string) string {
	if o, ok := sharedOrigins[provider]; ok {
		return o
	}
	return provider
}

// foreign reports whether p carries data provider does not read. A part's
// Origin is mapped too, so a stored part whose Origin is a prefix that
// shares another's still goes to both.
func foreign(p *events.Part, provider string) bool {
	return p.Origin != "" && Origin(p.Origin) != Origin(provider)
}

func foreignIn(parts []events.Part, provider string) bool {
	for i := range parts {
		if foreign(&parts[i], provider) {
			return true
		}
	}
	return false
}

// stripMessage is ForProvider of one message that holds a foreign part.
func stripMessage(m events.Message, provider string) events.Message {
	var serverCalls map[string]bool // ids of the provider-run tools' results
	if m.Role == events.RoleAssistant {
		for i := range m.Content {
			if p := &m.Content[i]; p.Type == events.PartToolResult && foreign(p, provider) {
				if serverCalls == nil {
					serverCalls = map[string]bool{}
				}
				serverCalls[p.ToolUseID] = true
			}
		}
	}
	content := make([]events.Part, 0, len(m.Content))
	for _, p := range m.Content {
		if !foreign(&p, provider) {
			content = append(content, p)
			continue
		}
		switch {
		case p.Type == events.PartThinking:
			continue
		case p.Type == events.PartToolResult && m.Role == events.RoleAssistant:
			continue
		case p.Type == events.PartToolUse && serverCalls[p.ID]:
			continue
		case p.Type == events.PartText, p.Type == events.PartToolUse:
			p.Signature, p.Origin = "", ""
		}
		content = append(content, p)
	}
	m.Content = content
	return m
}
