package openairesponses_test

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/llm"
	"github.com/llmworker/llmworker/pkg/provider/openairesponses"
	"github.com/llmworker/llmworker/pkg/provider/providertest"
)

// Media bytes with the signatures their media types have.
var (
	pngBytes = []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01")
	pdfBytes = []byte("%PDF-1.4\n1 0 obj\n%%EOF\n")
	wavBytes = []byte("RIFF\x24\x00\x00\x00WAVEfmt \x10\x00\x00\x00")
)

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

// doneBody is a response that completes at once.
func doneBody(t *testing.T) []byte {
	return sse(t, `{"type":"response.output_text.delta","output_index":0,"content_index":0,"item_id":"m","delta":"ok"}`,
		`{"type":"response.completed","response":{"id":"r","status":"completed","output":[]}}`)
}

// A user message with images (inline and by URL), PDFs (inline and by
// URL) and a text file is a user message whose content is the list the
// Responses reference documents: input_text, input_image (image_url: a
// data URL or the URL, detail), input_file (file_data as a data URL with
// filename, or file_url); the text file is input_text naming it.
func TestRequestUserMedia(t *testing.T) {
	srv := providertest.NewServer(t, providertest.SSE(doneBody(t)))
	req := &llm.Request{Model: "openai-responses:gpt-5", Messages: []events.Message{{Role: events.RoleUser, Content: []events.Part{
		events.TextPart("What is in these?"),
		events.ImagePart("image/png", pngBytes),
		events.ImageURLPart("image/jpeg", "https://example.com/cat.jpg"),
		events.FilePart("application/pdf", "report.pdf", pdfBytes),
		{Type: events.PartFile, MediaType: "application/pdf", URL: "https://example.com/paper.pdf"},
		events.FilePart("text/csv", "data.csv", []byte("a,b\n1,2\n")),
	}}}}
	if err := events.ValidateMessages("messages", req.Messages); err != nil {
		t.Fatal(err)
	}
	providertest.MustRun(t, newProvider(t, srv), req)
	want := fmt.Sprintf(`{
	  "model": "gpt-5", "stream": true, "store": false,
	  "input": [{"role": "user", "content": [
	    {"type": "input_text", "text": "What is in these?"},
	    {"type": "input_image", "image_url": "data:image/png;base64,%s", "detail": "auto"},
	    {"type": "input_image", "image_url": "https://example.com/cat.jpg", "detail": "auto"},
	    {"type": "input_file", "file_data": "data:application/pdf;base64,%s", "filename": "report.pdf"},
	    {"type": "input_file", "file_url": "https://example.com/paper.pdf"},
	    {"type": "input_text", "text": "<file name=\"data.csv\" media_type=\"text/csv\">\na,b\n1,2\n</file>"}
	  ]}]
	}`, b64(pngBytes), b64(pdfBytes))
	providertest.AssertJSON(t, srv.LastRequest().Body, want)
}

// A tool result with images and files is a function_call_output whose
// output is the array of input_text, input_image and input_file items the
// reference documents; a result of text only keeps the string output.
func TestRequestToolResultMedia(t *testing.T) {
	srv := providertest.NewServer(t, providertest.SSE(doneBody(t)))
	req := &llm.Request{Model: "openai-responses:gpt-5", Messages: []events.Message{
		events.UserText("Look at the login page"),
		{Role: events.RoleAssistant, Content: []events.Part{
			events.ToolUsePart("call_1", "screenshot", nil),
			events.ToolUsePart("call_2", "clock", nil),
		}},
		{Role: events.RoleTool, Content: []events.Part{
			events.ToolResultParts("call_1", []events.Part{
				events.TextPart("the login page"),
				events.ImagePart("image/png", pngBytes),
				events.FilePart("application/pdf", "", pdfBytes),
			}, false),
			events.ToolResultParts("call_2", []events.Part{events.TextPart("09:00")}, false),
		}},
	}}
	providertest.MustRun(t, newProvider(t, srv), req)
	want := fmt.Sprintf(`{
	  "model": "gpt-5", "stream": true, "store": false,
	  "input": [
	    {"role": "user", "content": "Look at the login page"},
	    {"type": "function_call", "call_id": "call_1", "name": "screenshot", "arguments": "{}"},
	    {"type": "function_call", "call_id": "call_2", "name": "clock", "arguments": "{}"},
	    {"type": "function_call_output", "call_id": "call_1", "output": [
	      {"type": "input_text", "text": "the login page"},
	      {"type": "input_image", "image_url": "data:image/png;base64,%s", "detail": "auto"},
	      {"type": "input_file", "file_data": "data:application/pdf;base64,%s", "filename": "document.pdf"}
	    ]},
	    {"type": "function_call_output", "call_id": "call_2", "output": "09:00"}
	  ]
	}`, b64(pngBytes), b64(pdfBytes))
	providertest.AssertJSON(t, srv.LastRequest().Body, want)
}

// An assistant message holds output text only: its images and files go
// in the user message after it, led by a text saying whose they are,
// before that message's own text; after the function_call_output of the
// assistant's calls. An assistant message of media only says where they
// went.
func TestRequestAssistantMedia(t *testing.T) {
	srv := providertest.NewServer(t, providertest.SSE(doneBody(t)))
	req := &llm.Request{Model: "openai-responses:gpt-5", Messages: []events.Message{
		events.UserText("Chart the sales"),
		{Role: events.RoleAssistant, Content: []events.Part{
			events.TextPart("Here is the chart."),
			events.ImagePart("image/png", pngBytes),
			events.FilePart("application/pdf", "sales.pdf", pdfBytes),
		}},
		events.UserText("Now in blue?"),
		{Role: events.RoleAssistant, Content: []events.Part{
			events.ToolUsePart("call_1", "render", nil),
			events.ImagePart("image/png", pngBytes),
		}},
		{Role: events.RoleTool, Content: []events.Part{events.ToolResultPart("call_1", "rendered", false)}},
		{Role: events.RoleAssistant, Content: []events.Part{events.FilePart("application/pdf", "", pdfBytes)}},
	}}
	providertest.MustRun(t, newProvider(t, srv), req)
	want := fmt.Sprintf(`{
	  "model": "gpt-5", "stream": true, "store": false,
	  "input": [
	    {"role": "user", "content": "Chart the sales"},
	    {"role": "assistant", "content": "Here is the chart."},
	    {"role": "user", "content": [
	      {"type": "input_text", "text": "[images and files of the assistant's message above]"},
	      {"type": "input_image", "image_url": "data:image/png;base64,%[1]s", "detail": "auto"},
	      {"type": "input_file", "file_data": "data:application/pdf;base64,%[2]s", "filename": "sales.pdf"},
	      {"type": "input_text", "text": "Now in blue?"}
	    ]},
	    {"type": "function_call", "call_id": "call_1", "name": "render", "arguments": "{}"},
	    {"type": "function_call_output", "call_id": "call_1", "output": "rendered"},
	    {"role": "user", "content": [
	      {"type": "input_text", "text": "[images and files of the assistant's message above]"},
	      {"type": "input_image", "image_url": "data:image/png;base64,%[1]s", "detail": "auto"}
	    ]},
	    {"role": "assistant", "content": "[the images and files of this message follow in a user message]"},
	    {"role": "user", "content": [
	      {"type": "input_text", "text": "[images and files of the assistant's message above]"},
	      {"type": "input_file", "file_data": "data:application/pdf;base64,%[2]s", "filename": "document.pdf"}
	    ]}
	  ]
	}`, b64(pngBytes), b64(pdfBytes))
	providertest.AssertJSON(t, srv.LastRequest().Body, want)
}

// Audio, which the Responses API takes nowhere, is refused with
// unsupported_content naming the part and the provider, before any
// request is made.
func TestRequestUnsupportedContent(t *testing.T) {
	for name, tc := range map[string]struct {
		msg   events.Message
		field string
	}{
		"audio": {events.Message{Role: events.RoleUser, Content: []events.Part{
			events.TextPart("listen"), events.FilePart("audio/wav", "a.wav", wavBytes)}}, "messages[0].content[1]"},
		"audio in a tool result": {events.Message{Role: events.RoleTool, Content: []events.Part{
			events.ToolResultParts("call_1", []events.Part{events.TextPart("recorded"), events.FilePart("audio/wav", "", wavBytes)}, false)}}, "messages[0].content[0].content[1]"},
		"audio from the assistant": {events.Message{Role: events.RoleAssistant, Content: []events.Part{
			events.TextPart("the recording"), events.FilePart("audio/wav", "", wavBytes)}}, "messages[0].content[1]"},
	} {
		t.Run(name, func(t *testing.T) {
			srv := providertest.NewServer(t, providertest.SSE(doneBody(t)))
			_, err := newProvider(t, srv).Stream(context.Background(), &llm.Request{Model: "openai-responses:gpt-5", Messages: []events.Message{tc.msg}})
			if kind, _ := llm.KindOf(err); kind != llm.KindUnsupportedContent {
				t.Fatalf("err %v: kind %q, want unsupported_content", err, kind)
			}
			if msg := err.Error(); !strings.Contains(msg, tc.field+":") || !strings.Contains(msg, "openai-responses") {
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
	srv := providertest.NewServer(t, providertest.SSE(doneBody(t)))
	ref := "sha256:" + strings.Repeat("cd", 32)
	_, err := newProvider(t, srv).Stream(context.Background(), &llm.Request{Model: "openai-responses:gpt-5", Messages: []events.Message{
		{Role: events.RoleTool, Content: []events.Part{events.ToolResultParts("call_1", []events.Part{
			{Type: events.PartFile, MediaType: "application/pdf", Ref: ref, Size: 3 << 20}}, false)}},
	}})
	if !errors.Is(err, openairesponses.ErrInvalidRequest) || !strings.Contains(err.Error(), "messages[0].content[0].content[0]: unresolved media ref") {
		t.Fatalf("err = %v", err)
	}
	if kind, _ := llm.KindOf(err); kind != llm.KindInvalidRequest {
		t.Fatalf("kind %q", kind)
	}
	if n := srv.RequestCount(); n != 0 {
		t.Fatalf("%d requests reached the server", n)
	}
}
