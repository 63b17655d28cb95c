package mcp_test

import (
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/mcp"
)

// BenchmarkMCPRoundTrip: one call of an MCP server's tool (streamable
// HTTP, in process) made directly with the SDK's client, against the same
// call through llmworker: a JetStream tool call to a toolexec replica
// hosting the server's tools, which calls the server and stores the
// result (the path of a turn's call). The difference is what llmworker
// adds (target: at most 1 ms at p50).
func BenchmarkMCPRoundTrip(b *testing.B) {
	url, _ := httpServerB(b)
	in := json.RawMessage(`{"a":1,"b":2}`)
	pct := func(b *testing.B, lat []time.Duration) {
		slices.Sort(lat)
		at := func(p float64) float64 {
			return float64(lat[min(len(lat)-1, int(float64(len(lat))*p))].Microseconds()) / 1000
		}
		b.ReportMetric(at(0.50), "p50-ms")
		b.ReportMetric(at(0.99), "p99-ms")
	}
	b.Run("direct", func(b *testing.B) {
		ctx := context.Background()
		cs, err := sdk.NewClient(&sdk.Implementation{Name: "bench", Version: "1"}, nil).Connect(ctx, &sdk.StreamableClientTransport{Endpoint: url}, nil)
		if err != nil {
			b.Fatal(err)
		}
		defer cs.Close()
		var lat []time.Duration
		b.ReportAllocs()
		for b.Loop() {
			t0 := time.Now()
			if _, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "add", Arguments: in}); err != nil {
				b.Fatal(err)
			}
			lat = append(lat, time.Since(t0))
		}
		pct(b, lat)
	})
	b.Run("toolexec", func(b *testing.B) {
		ctx := context.Background()
		h, err := mcp.Connect(ctx, []mcp.ServerConfig{{Name: "bench", URL: url}}, mcp.Options{})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = h.Close() }) // after hostOn's cleanup
		_, tc, _ := hostOn(b, h)
		var lat []time.Duration
		i := 0
		b.ReportAllocs()
		for b.Loop() {
			i++
			t0 := time.Now()
			res, err := tc.Call(ctx, events.ToolCallRequest{TurnID: "bench", CallID: "c" + strconv.Itoa(i), Name: "mcp__bench__add", Input: in}, 0)
			if err != nil || res.IsError {
				b.Fatal(res, err)
			}
			lat = append(lat, time.Since(t0))
		}
		pct(b, lat)
	})
}
