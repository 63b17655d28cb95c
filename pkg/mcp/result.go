package mcp

import (
	"encoding/json"
	"fmt"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/tool"
)

// ResultContent is what the model reads of a tool result, with its media:
// images become image parts, audio and blob resources file parts (with
// their MIME type), text resources text; a resource link, and media of a
// type the model cannot read (events.ImageMediaTypes,
// events.FileMediaTypes) or whose bytes are not of their declared type,
// become the bracketed note of ResultText, so nothing is dropped without
// a word. A structuredContent is the first part, as JSON text, in place
// of the text parts (which only repeat it). parts is nil when the result
// has no media: text is then ResultText's.
func ResultContent(res *sdk.CallToolResult) (text string, parts tool.Content, err error) {
	media := false
	for _, c := range res.Content {
		switch c := c.(type) {
		case *sdk.ImageContent, *sdk.AudioContent:
			media = true
		case *sdk.EmbeddedResource:
			media = media || c.Resource != nil && c.Resource.Text == "" && len(c.Resource.Blob) > 0
		}
	}
	if !media {
		text, err = ResultText(res)
		return text, nil, err
	}
	parts = make(tool.Content, 0, len(res.Content)+1)
	structured := res.StructuredContent != nil
	if structured {
		b, err := json.Marshal(res.StructuredContent)
		if err != nil {
			return "", nil, fmt.Errorf("mcp: structured content: %w", err)
		}
		parts = append(parts, events.TextPart(string(b)))
	}
	for _, c := range res.Content {
		var p events.Part
		switch c := c.(type) {
		case *sdk.TextContent:
			if structured {
				continue
			}
			p = events.TextPart(c.Text)
		case *sdk.ImageContent:
			p = mediaPart(events.ImagePart(c.MIMEType, c.Data), fmt.Sprintf("[image %s, %d bytes]", c.MIMEType, len(c.Data)))
		case *sdk.AudioContent:
			p = mediaPart(events.FilePart(c.MIMEType, "", c.Data), fmt.Sprintf("[audio %s, %d bytes]", c.MIMEType, len(c.Data)))
		case *sdk.ResourceLink:
			p = events.TextPart("[resource link " + c.URI + "]")
		case *sdk.EmbeddedResource:
			r := c.Resource
			switch {
			case r == nil:
				continue
			case r.Text != "":
				if structured {
					continue
				}
				p = events.TextPart(r.Text)
			case len(r.Blob) > 0:
				p = mediaPart(events.FilePart(r.MIMEType, resourceName(r.URI), r.Blob), fmt.Sprintf("[resource %s, %s, %d bytes]", r.URI, r.MIMEType, len(r.Blob)))
			default:
				p = events.TextPart("[resource " + r.URI + "]")
			}
		default:
			p = events.TextPart(fmt.Sprintf("[%T]", c))
		}
		parts = append(parts, p)
	}
	return events.PartsText(parts), parts, nil
}

// mediaPart is p when it is a part the model can read, else a text part
// with note and why not.
func mediaPart(p events.Part, note string) events.Part {
	p.MediaType = strings.ToLower(strings.TrimSpace(p.MediaType))
	if err := p.Validate(); err != nil {
		return events.TextPart(note[:len(note)-1] + ": not sent to the model: " + err.Error() + "]")
	}
	return p
}

// resourceName is the last path element of a resource URI, a file part's
// name.
func resourceName(uri string) string {
	if i := strings.LastIndexByte(uri, '/'); i >= 0 && i < len(uri)-1 {
		return uri[i+1:]
	}
	return ""
}

// ResultText is what the model reads of a tool result: its
// structuredContent as JSON when there is some (the exact data, which the
// text parts only repeat by the protocol's advice); otherwise its content
// parts, text as it is and the others as a bracketed note ([image
// image/png, 1234 bytes], [audio …], [resource file:///x], [resource
// link file:///x]), joined by newlines.
func ResultText(res *sdk.CallToolResult) (string, error) {
	if res.StructuredContent != nil {
		b, err := json.Marshal(res.StructuredContent)
		if err != nil {
			return "", fmt.Errorf("mcp: structured content: %w", err)
		}
		return string(b), nil
	}
	parts := make([]string, 0, len(res.Content))
	for _, c := range res.Content {
		switch c := c.(type) {
		case *sdk.TextContent:
			parts = append(parts, c.Text)
		case *sdk.ImageContent:
			parts = append(parts, fmt.Sprintf("[image %s, %d bytes]", c.MIMEType, len(c.Data)))
		case *sdk.AudioContent:
			parts = append(parts, fmt.Sprintf("[audio %s, %d bytes]", c.MIMEType, len(c.Data)))
		case *sdk.ResourceLink:
			parts = append(parts, "[resource link "+c.URI+"]")
		case *sdk.EmbeddedResource:
			if c.Resource != nil && c.Resource.Text != "" {
				parts = append(parts, c.Resource.Text)
			} else if c.Resource != nil {
				parts = append(parts, "[resource "+c.Resource.URI+"]")
			}
		default:
			parts = append(parts, fmt.Sprintf("[%T]", c))
		}
	}
	return strings.Join(parts, "\n"), nil
}
