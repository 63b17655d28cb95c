package mcp_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/llmworker/llmworker/pkg/mcp"
	"github.com/llmworker/llmworker/pkg/tool"
)

// annotatedServer serves tools with each combination of the annotations
// that say a call may be made for nothing.
func annotatedServer(t *testing.T) string {
	t.Helper()
	s := sdk.NewServer(&sdk.Implementation{Name: "annotated", Version: "1"}, nil)
	noop := func(context.Context, *sdk.CallToolRequest, textIn) (*sdk.CallToolResult, any, error) {
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "ok"}}}, nil, nil
	}
	destructive := true
	for _, tl := range []*sdk.Tool{
		{Name: "read", Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true}},
		{Name: "put", Annotations: &sdk.ToolAnnotations{IdempotentHint: true, DestructiveHint: &destructive}},
		{Name: "send", Annotations: &sdk.ToolAnnotations{Title: "Send"}},
		{Name: "plain"},
	} {
		tl.Description = tl.Name
		sdk.AddTool(s, tl, noop)
	}
	srv := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s }, nil))
	t.Cleanup(srv.Close)
	return srv.URL
}

// An MCP tool may start while the model streams when its server says it
// is read-only or idempotent (readOnlyHint, idempotentHint), and not
// otherwise; a server's eager setting decides for all its tools.
func TestAnnotationsMakeToolsEager(t *testing.T) {
	url := annotatedServer(t)
	yes, no := true, false
	h := connect(t, mcp.ServerConfig{Name: "hints", URL: url},
		mcp.ServerConfig{Name: "all", URL: url, Eager: &yes},
		mcp.ServerConfig{Name: "none", URL: url, Eager: &no})
	want := map[string]bool{
		"mcp__hints__read": true, "mcp__hints__put": true, "mcp__hints__send": false, "mcp__hints__plain": false,
		"mcp__all__read": true, "mcp__all__put": true, "mcp__all__send": true, "mcp__all__plain": true,
		"mcp__none__read": false, "mcp__none__put": false, "mcp__none__send": false, "mcp__none__plain": false,
	}
	got := map[string]bool{}
	for _, tl := range h.Tools() {
		got[tl.Name()] = tool.EagerOf(tl)
		if tool.CatalogEntry(tl).Eager != got[tl.Name()] {
			t.Errorf("%s: the catalog entry's eager differs from the tool's", tl.Name())
		}
	}
	if len(got) != len(want) {
		t.Fatalf("tools %v, want %v", got, want)
	}
	for name, eager := range want {
		if got[name] != eager {
			t.Errorf("%s: eager %v, want %v", name, got[name], eager)
		}
	}
}
