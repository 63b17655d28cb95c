package openai_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/llm"
	"github.com/llmworker/llmworker/pkg/provider/openai"
	"github.com/llmworker/llmworker/pkg/provider/providertest"
)

// Media bytes with the signatures their media types have.
var (
	pngBytes = []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01")
	pdfBytes = []byte("%PDF-1.4\n1 0 obj\n%%EOF\n")
	wavBytes = []byte("RIFF\x24\x00\x00\x00WAVEfmt \x10\x00\x00\x00")
	mp3Bytes = []byte("ID3\x04\x00\x00\x00\x00\x00\x00")
	oggBytes = []byte("OggS\x00\x02\x00\x00\x00\x00")
)

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

// A user message with images (inline and by URL), a PDF, a text file and
// wav audio is one user message whose content is the array of parts the
// Chat Completions reference documents: image_url (a data URL or the
// URL), file (file_data as a data URL, filename), the text file as text
// naming it, input_audio (base64 data, format).
func TestRequestUserMedia(t *testing.T) {
	srv := providertest.NewServer(t, providertest.SSE([]byte(doneBody)))
	req := &llm.Request{Model: "openai:gpt-4o", Messages: []events.Message{{Role: events.RoleUser, Content: []events.Part{
		events.TextPart("What is in these?"),
		events.ImagePart("image/png", pngBytes),
		events.ImageURLPart("image/jpeg", "https://example.com/cat.jpg"),
		events.FilePart("application/pdf", "report.pdf", pdfBytes),
		events.FilePart("text/plain", "notes.txt", []byte("buy milk")),
		events.FilePart("audio/wav", "", wavBytes),
		events.FilePart("audio/mpeg", "", mp3Bytes),
	}}}}
	if err := events.ValidateMessages("messages", req.Messages); err != nil {
		t.Fatal(err)
	}
	providertest.MustRun(t, newProvider(t, srv), req)
	want := fmt.Sprintf(`{
	  "model": "gpt-4o", "stream": true, "stream_options": {"include_usage": true},
	  "messages": [{"role": "user", "content": [
	    {"type": "text", "text": "What is in these?"},
	    {"type": "image_url", "image_url": {"url": "data:image/png;base64,%s"}},
	    {"type": "image_url", "image_url": {"url": "https://example.com/cat.jpg"}},
	    {"type": "file", "file": {"file_data": "data:application/pdf;base64,%s", "filename": "report.pdf"}},
	    {"type": "text", "text": "<file name=\"notes.txt\" media_type=\"text/plain\">\nbuy milk\n</file>"},
	    {"type": "input_audio", "input_audio": {"data": "%s", "format": "wav"}},
	    {"type": "input_audio", "input_audio": {"data": "%s", "format": "mp3"}}
	  ]}]
	}`, b64(pngBytes), b64(pdfBytes), b64(wavBytes), b64(mp3Bytes))
	providertest.AssertJSON(t, srv.LastRequest().Body, want)
}

// A tool message takes text only: the images of a step's tool results go
// in one user message right after the step's tool messages, each result's
// media after a text naming its call id; a result of media only gets a
// tool message saying where they are. The user text that follows the
// results joins that message.
func TestRequestToolResultMedia(t *testing.T) {
	srv := providertest.NewServer(t, providertest.SSE([]byte(doneBody)))
	call := events.Message{Role: events.RoleAssistant, Content: []events.Part{
		events.ToolUsePart("call_1", "screenshot", nil),
		events.ToolUsePart("call_2", "render", nil),
		events.ToolUsePart("call_3", "clock", nil),
	}}
	results := events.Message{Role: events.RoleTool, Content: []events.Part{
		events.ToolResultParts("call_1", []events.Part{events.TextPart("the login page"), events.ImagePart("image/png", pngBytes)}, false),
		events.ToolResultParts("call_2", []events.Part{events.ImageURLPart("image/png", "https://example.com/chart.png")}, false),
		events.ToolResultPart("call_3", "09:00", false),
	}}
	req := &llm.Request{Model: "openai:gpt-4o", Messages: []events.Message{
		events.UserText("Look at the login page"), call, results, events.UserText("And now?"),
	}}
	providertest.MustRun(t, newProvider(t, srv), req)
	want := fmt.Sprintf(`{
	  "model": "gpt-4o", "stream": true, "stream_options": {"include_usage": true},
	  "messages": [
	    {"role": "user", "content": "Look at the login page"},
	    {"role": "assistant", "tool_calls": [
	      {"id": "call_1", "type": "function", "function": {"name": "screenshot", "arguments": "{}"}},
	      {"id": "call_2", "type": "function", "function": {"name": "render", "arguments": "{}"}},
	      {"id": "call_3", "type": "function", "function": {"name": "clock", "arguments": "{}"}}
	    ]},
	    {"role": "tool", "tool_call_id": "call_1", "content": "the login page"},
	    {"role": "tool", "tool_call_id": "call_2", "content": "[the images and files of this result follow in a user message]"},
	    {"role": "tool", "tool_call_id": "call_3", "content": "09:00"},
	    {"role": "user", "content": [
	      {"type": "text", "text": "[images and files of the result of tool call call_1]"},
	      {"type": "image_url", "image_url": {"url": "data:image/png;base64,%s"}},
	      {"type": "text", "text": "[images and files of the result of tool call call_2]"},
	      {"type": "image_url", "image_url": {"url": "https://example.com/chart.png"}},
	      {"type": "text", "text": "And now?"}
	    ]}
	  ]
	}`, b64(pngBytes))
	providertest.AssertJSON(t, srv.LastRequest().Body, want)

	// The step's last message: the media follow the tool messages alone,
	// before the next assistant message.
	req.Messages = []events.Message{events.UserText("Look"), call, results,
		{Role: events.RoleAssistant, Content: []events.Part{events.TextPart("Done.")}}}
	providertest.MustRun(t, newProvider(t, srv), req)
	var body struct {
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(srv.LastRequest().Body, &body); err != nil {
		t.Fatal(err)
	}
	var roles []string
	for _, m := range body.Messages {
		roles = append(roles, m.Role)
	}
	if got := strings.Join(roles, ","); got != "user,assistant,tool,tool,tool,user,assistant" {
		t.Fatalf("roles %s", got)
	}
}

// An assistant message holds text and tool calls only: its images and
// files go in the user message after it, led by a text saying whose they
// are, before that message's own text; after the tool messages when the
// assistant called tools. An assistant message of media only says where
// they went.
func TestRequestAssistantMedia(t *testing.T) {
	srv := providertest.NewServer(t, providertest.SSE([]byte(doneBody)))
	req := &llm.Request{Model: "openai:gpt-4o", Messages: []events.Message{
		events.UserText("Chart the sales"),
		{Role: events.RoleAssistant, Content: []events.Part{
			events.TextPart("Here is the chart."),
			events.ImagePart("image/png", pngBytes),
			events.FilePart("application/pdf", "sales.pdf", pdfBytes),
		}},
		events.UserText("Now in blue?"),
	}}
	providertest.MustRun(t, newProvider(t, srv), req)
	want := fmt.Sprintf(`{
	  "model": "gpt-4o", "stream": true, "stream_options": {"include_usage": true},
	  "messages": [
	    {"role": "user", "content": "Chart the sales"},
	    {"role": "assistant", "content": "Here is the chart."},
	    {"role": "user", "content": [
	      {"type": "text", "text": "[images and files of the assistant's message above]"},
	      {"type": "image_url", "image_url": {"url": "data:image/png;base64,%[1]s"}},
	      {"type": "file", "file": {"file_data": "data:application/pdf;base64,%[2]s", "filename": "sales.pdf"}},
	      {"type": "text", "text": "Now in blue?"}
	    ]}
	  ]
	}`, b64(pngBytes), b64(pdfBytes))
	providertest.AssertJSON(t, srv.LastRequest().Body, want)

	req.Messages = []events.Message{
		events.UserText("Chart the sales"),
		{Role: events.RoleAssistant, Content: []events.Part{
			events.ToolUsePart("call_1", "render", nil),
			events.ImagePart("image/png", pngBytes),
		}},
		{Role: events.RoleTool, Content: []events.Part{events.ToolResultPart("call_1", "rendered", false)}},
		{Role: events.RoleAssistant, Content: []events.Part{events.FilePart("application/pdf", "", pdfBytes)}},
	}
	providertest.MustRun(t, newProvider(t, srv), req)
	want = fmt.Sprintf(`{
	  "model": "gpt-4o", "stream": true, "stream_options": {"include_usage": true},
	  "messages": [
	    {"role": "user", "content": "Chart the sales"},
	    {"role": "assistant", "tool_calls": [
	      {"id": "call_1", "type": "function", "function": {"name": "render", "arguments": "{}"}}
	    ]},
	    {"role": "tool", "tool_call_id": "call_1", "content": "rendered"},
	    {"role": "user", "content": [
	      {"type": "text", "text": "[images and files of the assistant's message above]"},
	      {"type": "image_url", "image_url": {"url": "data:image/png;base64,%[1]s"}}
	    ]},
	    {"role": "assistant", "content": "[the images and files of this message follow in a user message]"},
	    {"role": "user", "content": [
	      {"type": "text", "text": "[images and files of the assistant's message above]"},
	      {"type": "file", "file": {"file_data": "data:application/pdf;base64,%[2]s", "filename": "document.pdf"}}
	    ]}
	  ]
	}`, b64(pngBytes), b64(pdfBytes))
	providertest.AssertJSON(t, srv.LastRequest().Body, want)
}

// A part the API cannot take is refused with unsupported_content naming
// the part and the provider, before any request is made.
func TestRequestUnsupportedContent(t *testing.T) {
	for name, tc := range map[string]struct {
		msg   events.Message
		field string
	}{
		"ogg audio": {events.Message{Role: events.RoleUser, Content: []events.Part{
			events.TextPart("listen"), events.FilePart("audio/ogg", "a.ogg", oggBytes)}}, "messages[0].content[1]"},
		"pdf by url": {events.Message{Role: events.RoleUser, Content: []events.Part{
			{Type: events.PartFile, MediaType: "application/pdf", URL: "https://example.com/a.pdf"}}}, "messages[0].content[0]"},
		"ogg in a tool result": {events.Message{Role: events.RoleTool, Content: []events.Part{
			events.ToolResultParts("call_1", []events.Part{events.FilePart("audio/ogg", "", oggBytes)}, false)}}, "messages[0].content[0].content[0]"},
		"pdf by url from the assistant": {events.Message{Role: events.RoleAssistant, Content: []events.Part{
			events.TextPart("the paper"), {Type: events.PartFile, MediaType: "application/pdf", URL: "https://example.com/a.pdf"}}}, "messages[0].content[1]"},
	} {
		t.Run(name, func(t *testing.T) {
			srv := providertest.NewServer(t, providertest.SSE([]byte(doneBody)))
			_, err := newProvider(t, srv).Stream(context.Background(), &llm.Request{Model: "openai:gpt-4o", Messages: []events.Message{tc.msg}})
			if kind, _ := llm.KindOf(err); kind != llm.KindUnsupportedContent {
				t.Fatalf("err %v: kind %q, want unsupported_content", err, kind)
			}
			if msg := err.Error(); !strings.Contains(msg, tc.field+":") || !strings.Contains(msg, "openai") {
				t.Fatalf("err %q does not name %s and the provider", msg, tc.field)
			}
			if n := srv.RequestCount(); n != 0 {
				t.Fatalf("%d requests reached the server", n)
			}
		})
	}
}

// A part that holds only an LLMW_MEDIA ref was not resolved by ingest: an
// invalid request naming the field, before any request.
func TestRequestUnresolvedRef(t *testing.T) {
	srv := providertest.NewServer(t, providertest.SSE([]byte(doneBody)))
	ref := "sha256:" + strings.Repeat("ab", 32)
	_, err := newProvider(t, srv).Stream(context.Background(), &llm.Request{Model: "openai:gpt-4o", Messages: []events.Message{
		{Role: events.RoleUser, Content: []events.Part{events.TextPart("see"), {Type: events.PartImage, MediaType: "image/png", Ref: ref, Size: 1 << 20}}},
	}})
	if !errors.Is(err, openai.ErrInvalidRequest) || !strings.Contains(err.Error(), "messages[0].content[1]: unresolved media ref") {
		t.Fatalf("err = %v", err)
	}
	if kind, _ := llm.KindOf(err); kind != llm.KindInvalidRequest {
		t.Fatalf("kind %q", kind)
	}
	if n := srv.RequestCount(); n != 0 {
		t.Fatalf("%d requests reached the server", n)
	}
}
