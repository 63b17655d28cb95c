package anthropic

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	sdk "github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/packages/param"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/llm"
)

// messageParams maps the transcript. Tool messages become user messages
// (the API carries tool results in user turns), and consecutive messages of
// the same role are merged because the API expects alternating turns. An
// assistant turn takes no image or document blocks, so an assistant
// message's images and files join the user turn after it
// (llm.MoveAssistantMedia).
func messageParams(req []events.Message) ([]sdk.MessageParam, error) {
	msgs, fields := llm.MoveAssistantMedia(req)
	out := make([]sdk.MessageParam, 0, len(msgs))
	for i, m := range msgs {
		role := sdk.MessageParamRoleUser
		if m.Role == events.RoleAssistant {
			role = sdk.MessageParamRoleAssistant
		}
		blocks := make([]sdk.ContentBlockParamUnion, 0, len(m.Content))
		for j, part := range m.Content {
			b, ok, err := blockParam(part, role, fields.Part(i, j))
			if err != nil {
				return nil, err
			}
			if ok {
				blocks = append(blocks, b)
			}
		}
		if len(blocks) == 0 {
			continue
		}
		if n := len(out); n > 0 && out[n-1].Role == role {
			out[n-1].Content = append(out[n-1].Content, blocks...)
			continue
		}
		out = append(out, sdk.MessageParam{Role: role, Content: blocks})
	}
	return out, nil
}

func blockParam(part events.Part, role sdk.MessageParamRole, field string) (sdk.ContentBlockParamUnion, bool, error) {
	switch part.Type {
	case events.PartText:
		if part.Text == "" {
			// The API rejects empty text blocks.
			return sdk.ContentBlockParamUnion{}, false, nil
		}
		return sdk.NewTextBlock(part.Text), true, nil
	case events.PartImage, events.PartFile:
		img, doc, err := mediaBlock(&part, field)
		if err != nil {
			return sdk.ContentBlockParamUnion{}, false, err
		}
		if img != nil {
			return sdk.ContentBlockParamUnion{OfImage: img}, true, nil
		}
		return sdk.ContentBlockParamUnion{OfDocument: doc}, true, nil
	case events.PartThinking:
		if data, ok := llm.NativeCompactionData(&part); ok {
			// A compaction block this adapter streamed goes back as it
			// came; one of another provider is not ours to send.
			var c sdk.BetaCompactionBlockParam
			if role != sdk.MessageParamRoleAssistant || json.Unmarshal([]byte(data), &c) != nil || c.Type != c.Type.Default() {
				return sdk.ContentBlockParamUnion{}, false, nil
			}
			return param.Override[sdk.ContentBlockParamUnion](json.RawMessage(data)), true, nil
		}
		if data, ok := RedactedData(part.Signature); ok {
			return sdk.NewRedactedThinkingBlock(data), true, nil
		}
		if part.Redacted {
			return sdk.NewRedactedThinkingBlock(part.Signature), true, nil
		}
		if role != sdk.MessageParamRoleAssistant {
			return sdk.ContentBlockParamUnion{}, false, nil
		}
		return sdk.NewThinkingBlock(part.Signature, part.Thinking), true, nil
	case events.PartToolUse:
		input := json.RawMessage(bytes.TrimSpace(part.Input))
		if len(input) == 0 {
			input = json.RawMessage("{}")
		} else if !json.Valid(input) {
			return sdk.ContentBlockParamUnion{}, false, invalid("%s: tool_use %q: input is not valid JSON", field, part.ID)
		}
		if strings.HasPrefix(part.ID, serverToolIDPrefix) {
			return sdk.NewServerToolUseBlock(part.ID, input, sdk.ServerToolUseBlockParamName(part.Name)), true, nil
		}
		return sdk.NewToolUseBlock(part.ID, input, part.Name), true, nil
	case events.PartToolResult:
		if role == sdk.MessageParamRoleAssistant || strings.HasPrefix(part.ToolUseID, serverToolIDPrefix) {
			// A server tool's result is part of the assistant turn; its
			// content is the raw result block this adapter streamed.
			var b sdk.ContentBlockParamUnion
			if err := json.Unmarshal([]byte(part.Content), &b); err != nil {
				return b, false, invalid("%s: server tool result %q: content is not a result block: %w", field, part.ToolUseID, err)
			}
			return b, true, nil
		}
		if part.Parts == nil {
			return sdk.NewToolResultBlock(part.ToolUseID, part.Content, part.IsError), true, nil
		}
		content := make([]sdk.ToolResultBlockParamContentUnion, 0, len(part.Parts))
		for k, sub := range part.Parts {
			f := fmt.Sprintf("%s.content[%d]", field, k)
			switch sub.Type {
			case events.PartText:
				if sub.Text != "" {
					content = append(content, sdk.ToolResultBlockParamContentUnion{OfText: &sdk.TextBlockParam{Text: sub.Text}})
				}
			case events.PartImage, events.PartFile:
				img, doc, err := mediaBlock(&sub, f)
				if err != nil {
					return sdk.ContentBlockParamUnion{}, false, err
				}
				content = append(content, sdk.ToolResultBlockParamContentUnion{OfImage: img, OfDocument: doc})
			default:
				return sdk.ContentBlockParamUnion{}, false, invalid("%s: a tool result holds text, image and file parts, not %q", f, sub.Type)
			}
		}
		return sdk.ContentBlockParamUnion{OfToolResult: &sdk.ToolResultBlockParam{
			ToolUseID: part.ToolUseID, Content: content, IsError: sdk.Bool(part.IsError),
		}}, true, nil
	}
	return sdk.ContentBlockParamUnion{}, false, nil
}

// mediaBlock maps an image part to an image block and a file part to a
// document block (one of the two results is nil): images and PDFs by data
// or URL, text files (text/*, application/json) as a plain-text document.
// What the Messages API cannot take (audio, a text file by URL) is
// llm.UnsupportedContent; a part whose bytes are only a media ref, which
// ingest resolves before the adapter sees the request, is invalid.
func mediaBlock(part *events.Part, field string) (*sdk.ImageBlockParam, *sdk.DocumentBlockParam, error) {
	mt := strings.ToLower(strings.TrimSpace(part.MediaType))
	if part.Data == "" && part.URL == "" {
		if part.Ref != "" {
			return nil, nil, invalid("%s.ref: unresolved media ref %q (ingest resolves refs before the provider call)", field, part.Ref)
		}
		return nil, nil, invalid("%s: a %s part needs data or url", field, part.Type)
	}
	if part.Type == events.PartImage {
		img := &sdk.ImageBlockParam{}
		if part.Data != "" {
			img.Source.OfBase64 = &sdk.Base64ImageSourceParam{Data: part.Data, MediaType: sdk.Base64ImageSourceMediaType(mt)}
		} else {
			img.Source.OfURL = &sdk.URLImageSourceParam{URL: part.URL}
		}
		return img, nil, nil
	}
	doc := &sdk.DocumentBlockParam{}
	if part.Filename != "" {
		doc.Title = sdk.String(part.Filename)
	}
	switch {
	case mt == "application/pdf" && part.Data != "":
		doc.Source.OfBase64 = &sdk.Base64PDFSourceParam{Data: part.Data}
	case mt == "application/pdf":
		doc.Source.OfURL = &sdk.URLPDFSourceParam{URL: part.URL}
	case strings.HasPrefix(mt, "text/") || mt == "application/json":
		if part.Data == "" {
			return nil, nil, llm.UnsupportedContent("anthropic", field, mt+" file by URL (the Messages API fetches only PDFs)")
		}
		b, err := part.Bytes()
		if err != nil {
			return nil, nil, invalid("%s.data: %w", field, err)
		}
		doc.Source.OfText = &sdk.PlainTextSourceParam{Data: string(b)}
	default:
		return nil, nil, llm.UnsupportedContent("anthropic", field, mt+" "+string(part.Type))
	}
	return nil, doc, nil
}
