package llm

import (
	"strings"

	"github.com/llmworker/llmworker/pkg/events"
)

// The estimate's rules, in tokens. Text is counted as its UTF-8 bytes
// divided by BytesPerToken, rounded up: the rule of thumb of the
// providers' tokenizer docs for English text and code (an estimate, not
// a count: text in scripts of several bytes a character is
// underestimated, which the reserve of InputBudget and the next call's
// reported usage make good).
const (
	// BytesPerToken is the bytes of text counted as one token.
	BytesPerToken = 4
	// MessageOverheadTokens is counted per message: its role and the
	// separators a provider's chat template adds.
	MessageOverheadTokens = 4
	// PartOverheadTokens is counted per tool_use and tool_result part
	// (its id and the wrapping) and per tool definition.
	PartOverheadTokens = 8
	// ImageTokens is counted per image: the most of the providers' rules
	// for an image they resize (Anthropic: width×height/750, up to about
	// 1,600 for the 1.15-megapixel images it keeps; OpenAI: up to 1,105
	// at high detail; Gemini: 258 per 768×768 tile).
	ImageTokens = 1600
	// FileMinTokens is the least a file part other than text counts (a
	// PDF page read as text and as an image is 1,500 to 3,000 tokens at
	// Anthropic; the rule counts a file's bytes/16, but never less than
	// one page).
	FileMinTokens = 1600
	// BinaryBytesPerToken is the bytes of a file that is not text (a PDF,
	// audio) counted as one token.
	BinaryBytesPerToken = 16
)

// EstimateTokens estimates the input tokens of req: what a provider will
// count for its system prompt, tools, response schema and messages.
//
// When lastInputTokens > 0 it is the input tokens the provider reported
// for the last call of the same transcript — all of them, cached or not
// (price.Split(model, usage).AllInput()) — whose request held the first
// lastMessages of req.Messages and the same system prompt, tools and
// options; the estimate is then lastInputTokens plus the estimate of the
// messages added since (req.Messages[lastMessages:]), so that the
// unchanged prefix costs nothing to count and the provider's own count
// of it is used. Otherwise (lastInputTokens ≤ 0, or lastMessages out of
// range: a transcript that was replaced, a first call) everything is
// estimated.
//
// The cost is one pass over the parts of the messages estimated, reading
// string lengths only: nothing is encoded. The rules per part: text and
// thinking, their bytes/BytesPerToken; tool_use, its name and input;
// tool_result, its content (or its parts); image, ImageTokens; file, its
// bytes/BytesPerToken for text (text/*, JSON, XML, YAML, CSV media
// types), else bytes/BinaryBytesPerToken but at least FileMinTokens (the
// bytes are the Size of a ref, or those of the base64 Data).
func EstimateTokens(req *Request, lastInputTokens int64, lastMessages int) int64 {
	if req == nil {
		return 0
	}
	if lastInputTokens > 0 && lastMessages > 0 && lastMessages <= len(req.Messages) {
		return lastInputTokens + EstimateMessages(req.Messages[lastMessages:])
	}
	n := textTokens(len(req.System))
	for _, t := range req.Tools {
		n += PartOverheadTokens + textTokens(len(t.Name)+len(t.Description)+len(t.InputSchema))
	}
	if rf := req.ResponseFormat; rf != nil {
		n += textTokens(len(rf.Name) + len(rf.Description) + len(rf.Schema))
	}
	return n + EstimateMessages(req.Messages)
}

// EstimateMessages is the estimate of msgs by the rules of
// EstimateTokens.
func EstimateMessages(msgs []events.Message) int64 {
	var n int64
	for i := range msgs {
		n += MessageOverheadTokens + partsTokens(msgs[i].Content)
	}
	return n
}

func partsTokens(parts []events.Part) int64 {
	var n int64
	for i := range parts {
		p := &parts[i]
		switch p.Type {
		case events.PartText:
			n += textTokens(len(p.Text))
		case events.PartThinking:
			n += textTokens(len(p.Thinking))
		case events.PartToolUse:
			n += PartOverheadTokens + textTokens(len(p.Name)+len(p.Input))
		case events.PartToolResult:
			if len(p.Parts) > 0 {
				n += PartOverheadTokens + partsTokens(p.Parts)
			} else {
				n += PartOverheadTokens + textTokens(len(p.Content))
			}
		case events.PartImage:
			n += ImageTokens
		case events.PartFile:
			n += fileTokens(p)
		default:
			n += textTokens(len(p.Text) + len(p.Content))
		}
	}
	return n
}

func fileTokens(p *events.Part) int64 {
	size := p.Size
	if p.Data != "" {
		size = int64(len(p.Data)) / 4 * 3
	}
	if textMedia(p.MediaType) {
		return textTokens64(size)
	}
	return max(size/BinaryBytesPerToken, FileMinTokens)
}

// textMedia reports whether a file of mediaType is read as text.
func textMedia(mediaType string) bool {
	mt := strings.ToLower(mediaType)
	if strings.HasPrefix(mt, "text/") {
		return true
	}
	for _, s := range []string{"json", "xml", "yaml", "csv", "javascript"} {
		if strings.Contains(mt, s) {
			return true
		}
	}
	return false
}

func textTokens(bytes int) int64 { return textTokens64(int64(bytes)) }

func textTokens64(bytes int64) int64 {
	if bytes <= 0 {
		return 0
	}
	return (bytes + BytesPerToken - 1) / BytesPerToken
}

// InputBudget is how many input tokens a call may send to a model of
// limits l: its window less the output the call asks room for (maxTokens
// when > 0, the request's max_tokens; else the model's MaxOutputTokens)
// and less reserve (the estimate's margin). ok is false when the window
// is unknown (0).
func (l ModelLimits) InputBudget(maxTokens int, reserve int64) (budget int64, ok bool) {
	if l.ContextWindow <= 0 {
		return 0, false
	}
	out := l.MaxOutputTokens
	if maxTokens > 0 {
		out = int64(maxTokens)
	}
	return l.ContextWindow - max(out, 0) - max(reserve, 0), true
}

// DefaultReserve is the reserve of a context check that names none: 2%
// of the window, at least 1,024 tokens — the margin for what the
// estimate's rules miss in the messages added since the last call.
func DefaultReserve(l ModelLimits) int64 { return max(l.ContextWindow/50, 1024) }

// ContextCheck is a request's estimate against its model's window.
type ContextCheck struct {
	// Estimate is the request's input tokens (EstimateTokens).
	Estimate int64
	// Budget is the input tokens the window leaves (InputBudget); 0 when
	// Known is false.
	Budget int64
	// Limits are the model's limits; zero when Known is false.
	Limits ModelLimits
	// Known is false when the model's limits are unknown: nothing can be
	// said before the provider answers.
	Known bool
}

// Over reports whether the estimate passes the budget.
func (c ContextCheck) Over() bool { return c.Known && c.Estimate > c.Budget }

// CheckContext estimates req (EstimateTokens with lastInputTokens and
// lastMessages) against the window of req.Model that limits names:
// window − output room (req.MaxTokens, else the model's max output) −
// reserve (reserve < 0: DefaultReserve). A nil limits, or a model it
// does not know, gives a check that is not Known.
func CheckContext(req *Request, limits LimitsFunc, lastInputTokens int64, lastMessages int, reserve int64) ContextCheck {
	c := ContextCheck{Estimate: EstimateTokens(req, lastInputTokens, lastMessages)}
	if req == nil || limits == nil {
		return c
	}
	l, ok := limits(req.Model)
	if !ok {
		return c
	}
	if reserve < 0 {
		reserve = DefaultReserve(l)
	}
	c.Budget, c.Known = l.InputBudget(req.MaxTokens, reserve)
	if c.Known {
		c.Limits = l
	}
	return c
}
