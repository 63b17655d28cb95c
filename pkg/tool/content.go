package tool

import (
	"context"
	"encoding/json"

	"github.com/llmworker/llmworker/pkg/events"
)

// Content is a tool result that shows the model images or files besides
// text: text, image and file parts (events.TextPart, events.ImagePart,
// events.FilePart), in the order the model reads them. A typed tool
// returns it as its result type (New[Args, tool.Content]); the executors
// (pkg/worker, toolexec, the MCP host) put the parts in the transcript's
// tool_result as its content array (docs/protocol.md §4). Execute, which
// returns text, gives the text of the text parts.
//
// Media above events.InlineMediaLimit belongs in the LLMW_MEDIA object
// store (a part with a Ref); an executor refuses a result whose inline
// media would not fit a NATS message, with an error naming the tool.
type Content []events.Part

// ContentTool is implemented by tools whose result may hold images and
// files: typed tools (whose result type is Content or []events.Part),
// toolexec's RemoteTool and the MCP host's tools. Executors call
// ExecuteContent (through ExecuteContent, the function) instead of
// Execute.
type ContentTool interface {
	Tool
	// ExecuteContent is Execute with the result's parts: parts is nil for
	// a text-only result, whose text is text; otherwise text is the text
	// of the text parts. Errors are as Execute's.
	ExecuteContent(ctx context.Context, input json.RawMessage) (text string, parts Content, err error)
}

// ExecuteContent runs t with input: t's ExecuteContent when it is a
// ContentTool, else its Execute, whose result is text only (parts nil).
func ExecuteContent(ctx context.Context, t Tool, input json.RawMessage) (text string, parts Content, err error) {
	if ct, ok := t.(ContentTool); ok {
		return ct.ExecuteContent(ctx, input)
	}
	text, err = t.Execute(ctx, input)
	return text, nil, err
}

// ResultSize is about the length of a result on the wire: its text (which
// the parts repeat in a result's Content) and its parts, inline media as
// base64. Executors bound it by what one NATS message holds.
func ResultSize(text string, parts Content) int {
	n := len(text)
	for i := range parts {
		p := &parts[i]
		n += 64 + len(p.Text) + len(p.Data) + len(p.URL) + len(p.Ref) + len(p.MediaType) + len(p.Filename)
	}
	return n
}
