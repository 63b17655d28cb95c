package gateway_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/gateway"
	"github.com/llmworker/llmworker/pkg/natstest"
)

// Model, tools and limits come from the configuration; a request may
// only narrow them. The turn request the gateway stores says so.
func TestRequestNarrowsConfig(t *testing.T) {
	srv := natstest.Start(t, natstest.Options{Provision: true})
	nc := srv.Connect(t)
	ctx := natstest.Context(t)
	g, err := gateway.New(ctx, nc, gateway.Config{
		Model: "replay:anthropic", Models: []string{"replay:openai"}, Tools: []string{"get_capital", "calculator"},
		MaxSteps: 3, System: "be brief",
	})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(g)
	t.Cleanup(func() {
		g.Close()
		hs.CloseClientConnections()
		hs.Close()
	})
	c := &gateway.Client{URL: hs.URL}
	msgs := []gateway.UIMessage{userMsg("capital of France?")}
	for _, tc := range []struct {
		req  gateway.ChatRequest
		want string
	}{
		{gateway.ChatRequest{ID: "n1", Messages: msgs, Tools: []string{"shell"}}, `"shell" is not offered`},
		{gateway.ChatRequest{ID: "n1", Messages: msgs, Tools: []string{"*"}}, `"*" is not offered`},
		{gateway.ChatRequest{ID: "n1", Messages: msgs, MaxSteps: 4}, "at most 3"},
		{gateway.ChatRequest{ID: "n1", Messages: msgs, Model: "replay:gemini"}, "not offered"},
	} {
		var he *gateway.HTTPError
		if _, err := c.Chat(ctx, &tc.req); !errors.As(err, &he) || he.Status != http.StatusBadRequest || !strings.Contains(he.Message, tc.want) {
			t.Errorf("%+v: %v, want 400 %q", tc.req, err, tc.want)
		}
	}

	// A narrowed request: no turn service runs, so the stream waits; the
	// stored request is what counts.
	sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	s, err := c.Chat(sctx, &gateway.ChatRequest{ID: "n2", Messages: msgs, Model: "replay:openai", Tools: []string{"calculator"}, MaxSteps: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	js, _ := jetstream.New(nc)
	stream, err := js.Stream(ctx, events.StreamTurns)
	if err != nil {
		t.Fatal(err)
	}
	m, err := stream.GetLastMsgForSubject(ctx, events.NewSubjects("").TurnSubmit())
	if err != nil {
		t.Fatal(err)
	}
	env, err := events.DecodeEnvelope(m.Header, m.Data)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := events.DecodeData[events.TurnRequest](env)
	if err != nil {
		t.Fatal(err)
	}
	if tr.SessionID != "n2" || tr.Model != "replay:openai" || !slices.Equal(tr.Tools, []string{"calculator"}) || tr.MaxSteps != 2 || tr.System != "be brief" ||
		len(tr.Messages) != 1 || tr.Messages[0].Content[0].Text != "capital of France?" {
		t.Fatalf("stored turn request %+v", tr)
	}
	typ, raw, err := s.Next()
	if err != nil || typ != "start" || !strings.Contains(string(raw), tr.TurnID) {
		t.Fatalf("first part %s %s %v, want start of %s", typ, raw, err, tr.TurnID)
	}
}

// A page of an allowed origin may call the API from the browser (CORS
// preflight and the answer's headers); any other origin gets no CORS
// headers, so the browser refuses it the answer.
func TestCORS(t *testing.T) {
	srv := natstest.Start(t, natstest.Options{Provision: true})
	g, err := gateway.New(natstest.Context(t), srv.Connect(t), gateway.Config{AllowOrigins: []string{"http://localhost:3000"}})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(g)
	t.Cleanup(func() {
		g.Close()
		hs.Close()
	})
	do := func(method, origin string) *http.Response {
		req, _ := http.NewRequestWithContext(ctxT(t), method, hs.URL+"/api/chat/s1/stream", nil)
		req.Header.Set("Origin", origin)
		req.Header.Set("Access-Control-Request-Method", "GET")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	pre := do(http.MethodOptions, "http://localhost:3000")
	if pre.StatusCode != 204 || pre.Header.Get("Access-Control-Allow-Origin") != "http://localhost:3000" || !strings.Contains(pre.Header.Get("Access-Control-Allow-Headers"), "Authorization") {
		t.Errorf("preflight: %d %v", pre.StatusCode, pre.Header)
	}
	if r := do(http.MethodGet, "http://localhost:3000"); r.StatusCode != 204 || r.Header.Get("Access-Control-Allow-Origin") != "http://localhost:3000" {
		t.Errorf("allowed origin: %d %v", r.StatusCode, r.Header)
	}
	if r := do(http.MethodGet, "http://evil.example"); r.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("other origin got %v", r.Header)
	}
}
