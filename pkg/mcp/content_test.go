package mcp_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/mcp"
	"github.com/llmworker/llmworker/pkg/natstest"
	"github.com/llmworker/llmworker/pkg/tool"
)

// Media of the kinds the part validation sniffs: PNG, WAV and PDF
// signatures.
var (
	pngData = []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00\x1f\x15\xc4\x89")
	wavData = []byte("RIFF\x24\x00\x00\x00WAVEfmt \x10\x00\x00\x00\x01\x00\x01\x00\x40\x1f\x00\x00")
	pdfData = []byte("%PDF-1.7\n1 0 obj\n<<>>\nendobj\n%%EOF\n")
)

func TestResultContent(t *testing.T) {
	for _, tc := range []struct {
		name string
		res  *sdk.CallToolResult
		text string
		want []events.Part // nil: a text result
	}{
		{"text only", &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "a"}, &sdk.TextContent{Text: "b"}}}, "a\nb", nil},
		{"image", &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "shot:"}, &sdk.ImageContent{MIMEType: "image/png", Data: pngData}}},
			"shot:", []events.Part{events.TextPart("shot:"), events.ImagePart("image/png", pngData)}},
		{"audio", &sdk.CallToolResult{Content: []sdk.Content{&sdk.AudioContent{MIMEType: "audio/wav", Data: wavData}}},
			"", []events.Part{events.FilePart("audio/wav", "", wavData)}},
		{"resources", &sdk.CallToolResult{Content: []sdk.Content{
			&sdk.EmbeddedResource{Resource: &sdk.ResourceContents{URI: "file:///notes.txt", MIMEType: "text/plain", Text: "the notes"}},
			&sdk.EmbeddedResource{Resource: &sdk.ResourceContents{URI: "file:///docs/report.pdf", MIMEType: "application/pdf", Blob: pdfData}},
		}}, "the notes", []events.Part{events.TextPart("the notes"), events.FilePart("application/pdf", "report.pdf", pdfData)}},
		{"structured content first", &sdk.CallToolResult{StructuredContent: map[string]any{"n": 1}, Content: []sdk.Content{
			&sdk.TextContent{Text: `{"n":1}`}, &sdk.ImageContent{MIMEType: "image/png", Data: pngData}}},
			`{"n":1}`, []events.Part{events.TextPart(`{"n":1}`), events.ImagePart("image/png", pngData)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			text, parts, err := mcp.ResultContent(tc.res)
			if err != nil {
				t.Fatal(err)
			}
			if text != tc.text || !reflect.DeepEqual([]events.Part(parts), tc.want) {
				t.Fatalf("ResultContent = %q, %+v; want %q, %+v", text, parts, tc.text, tc.want)
			}
		})
	}
}

// Media the model cannot read is said in a note, not dropped.
func TestResultContentNotesMediaTheModelCannotRead(t *testing.T) {
	_, parts, err := mcp.ResultContent(&sdk.CallToolResult{Content: []sdk.Content{
		&sdk.ImageContent{MIMEType: "image/svg+xml", Data: []byte("<svg/>")},
		&sdk.ImageContent{MIMEType: "image/jpeg", Data: pngData},
		&sdk.ImageContent{MIMEType: "image/png", Data: pngData},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if len(parts) != 3 || parts[0].Type != events.PartText || parts[1].Type != events.PartText || parts[2].Type != events.PartImage {
		t.Fatalf("parts %+v, want two notes and the image", parts)
	}
	if !strings.Contains(parts[0].Text, "image/svg+xml") || !strings.Contains(parts[0].Text, "not sent to the model") {
		t.Errorf("note %q", parts[0].Text)
	}
	if !strings.Contains(parts[1].Text, "holds image/png, not image/jpeg") {
		t.Errorf("note %q", parts[1].Text)
	}
}

// A host's tool gives the images of its server's result as parts.
func TestHostToolReturnsImageParts(t *testing.T) {
	s := sdk.NewServer(&sdk.Implementation{Name: "cam", Version: "1"}, nil)
	sdk.AddTool(s, &sdk.Tool{Name: "shot", Description: "Takes a picture."}, func(context.Context, *sdk.CallToolRequest, struct{}) (*sdk.CallToolResult, any, error) {
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.ImageContent{MIMEType: "image/png", Data: pngData}}}, nil, nil
	})
	srv := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s }, nil))
	t.Cleanup(srv.Close)
	h := connect(t, mcp.ServerConfig{Name: "cam", URL: srv.URL})
	tools := h.Tools()
	if len(tools) != 1 {
		t.Fatalf("%d tools", len(tools))
	}
	text, parts, err := tool.ExecuteContent(natstest.Context(t), tools[0], nil)
	if err != nil || text != "" || !reflect.DeepEqual([]events.Part(parts), []events.Part{events.ImagePart("image/png", pngData)}) {
		t.Fatalf("ExecuteContent = %q, %+v, %v", text, parts, err)
	}
}

// An MCP client of the gateway gets a tool's image as ImageContent and its
// file as an embedded blob resource.
func TestGatewayReturnsImageContent(t *testing.T) {
	w := newGatewayWorld(t, mcp.GatewayConfig{})
	cs := w.client(t, nil)
	if err := w.srv.Add(natstest.Context(t), tool.Must("scan", "Scans a page.", func(context.Context, keyIn) (tool.Content, error) {
		return tool.Content{events.TextPart("page 1:"), events.ImagePart("image/png", pngData), events.FilePart("application/pdf", "page1.pdf", pdfData)}, nil
	})); err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, "the scan tool is listed", func() bool {
		l, err := cs.ListTools(natstest.Context(t), nil)
		return err == nil && slices.ContainsFunc(l.Tools, func(tl *sdk.Tool) bool { return tl.Name == "scan" })
	})
	r := call(t, cs, "scan", map[string]any{"key": "k"})
	if r.IsError || len(r.Content) != 3 {
		t.Fatalf("result %+v", r)
	}
	if tc, ok := r.Content[0].(*sdk.TextContent); !ok || tc.Text != "page 1:" {
		t.Errorf("content[0] = %#v", r.Content[0])
	}
	if ic, ok := r.Content[1].(*sdk.ImageContent); !ok || ic.MIMEType != "image/png" || string(ic.Data) != string(pngData) {
		t.Errorf("content[1] = %#v, want the PNG as ImageContent", r.Content[1])
	}
	er, ok := r.Content[2].(*sdk.EmbeddedResource)
	if !ok || er.Resource == nil || er.Resource.MIMEType != "application/pdf" || string(er.Resource.Blob) != string(pdfData) || !strings.HasSuffix(er.Resource.URI, "page1.pdf") {
		t.Errorf("content[2] = %#v, want the PDF as an embedded blob resource", r.Content[2])
	}
}
