package main

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/llmworker/llmworker/internal/service"
	"github.com/llmworker/llmworker/internal/service/toolexecsvc"
	"github.com/llmworker/llmworker/pkg/natstest"
)

// --mcp is repeatable, and $LLMW_MCP holds one server a line.
func TestParseMCP(t *testing.T) {
	env := map[string]string{"LLMW_MCP": "a=cmd one\nb=https://h/mcp\n"}
	svc := &toolexecsvc.Service{}
	if _, err := service.Parse(svc, nil, func(k string) string { return env[k] }, &bytes.Buffer{}); err != nil || !slices.Equal(svc.MCP, []string{"a=cmd one", "b=https://h/mcp"}) {
		t.Fatalf("from the environment: %q %v", svc.MCP, err)
	}
	svc = &toolexecsvc.Service{}
	if _, err := service.Parse(svc, []string{"--mcp", "c=x", "--mcp", "d=y z", "--mcp-config", "/etc/mcp.yaml"}, func(k string) string { return env[k] }, &bytes.Buffer{}); err != nil ||
		!slices.Equal(svc.MCP, []string{"c=x", "d=y z"}) || svc.MCPConfig != "/etc/mcp.yaml" {
		t.Fatalf("flags replace the environment's list: %q %q %v", svc.MCP, svc.MCPConfig, err)
	}
}

// toolexec hosts an MCP server's tools beside its own, and refuses an
// invalid entry at start, naming it.
func TestHostsMCPServer(t *testing.T) {
	s := sdk.NewServer(&sdk.Implementation{Name: "t", Version: "1"}, nil)
	sdk.AddTool(s, &sdk.Tool{Name: "greet", Description: "Greets."}, func(ctx context.Context, _ *sdk.CallToolRequest, in struct {
		Name string `json:"name"`
	}) (*sdk.CallToolResult, any, error) {
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "hello " + in.Name}}}, nil, nil
	})
	srv := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s }, nil))
	t.Cleanup(srv.Close)
	ns := natstest.Start(t, natstest.Options{})
	env := service.Env{NC: ns.NC, Instance: "t1", Log: slog.New(slog.DiscardHandler)}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	svc := &toolexecsvc.Service{Options: toolexecsvc.Options{MCP: []string{"web=" + srv.URL}}}
	st, err := svc.Start(ctx, env)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(svc.Tools, "mcp__web__greet") || !slices.Contains(svc.Tools, "calculator") {
		t.Errorf("tools %v", svc.Tools)
	}
	if err := st.Stop(ctx); err != nil {
		t.Fatal(err)
	}

	_, err = (&toolexecsvc.Service{Options: toolexecsvc.Options{MCP: []string{"web=" + srv.URL, "web2"}}}).Start(ctx, env)
	if !errors.Is(err, service.ErrUsage) || !strings.Contains(err.Error(), `--mcp "web2"`) {
		t.Errorf("invalid entry: %v", err)
	}
	_, err = (&toolexecsvc.Service{Options: toolexecsvc.Options{MCP: []string{"gone=http://127.0.0.1:1/mcp"}}}).Start(ctx, env)
	if err == nil || !strings.Contains(err.Error(), `"gone"`) {
		t.Errorf("unreachable server: %v", err)
	}
}
