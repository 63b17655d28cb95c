package gateway_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"

	"github.com/llmworker/llmworker/pkg/gateway"
	"github.com/llmworker/llmworker/pkg/llm/llmtest"
	"github.com/llmworker/llmworker/pkg/natstest"
	"github.com/llmworker/llmworker/pkg/turn"
)

// A Go client of the HTTP API, as the AI SDK's useChat is one in a browser:
// it posts a user message to /api/chat and reads the turn's UI message
// stream part by part. Against a running installation only the client's
// part is needed: gateway.Client{URL: "http://127.0.0.1:8080"} for
// `llmworker up`.
func ExampleClient() {
	// A gateway in front of a turn service whose model is scripted: what
	// `llmworker up` runs on its --http address, with ingest calling the
	// model.
	srv, err := natstest.New(natstest.Options{})
	if err != nil {
		panic(err)
	}
	defer srv.Close()
	ctx := context.Background()
	svc, err := turn.New(srv.NC, turn.Config{
		Provider: llmtest.NewScripted(llmtest.TextStep("Hello", ", world")),
		Logger:   slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		panic(err)
	}
	if err := svc.Start(ctx); err != nil {
		panic(err)
	}
	defer svc.Stop(ctx)
	g, err := gateway.New(ctx, srv.NC, gateway.Config{Model: "scripted:demo"})
	if err != nil {
		panic(err)
	}
	hs := httptest.NewServer(g)
	defer hs.Close()
	defer g.Close()

	// The client.
	c := gateway.Client{URL: hs.URL, HTTP: hs.Client()}
	stream, err := c.Chat(ctx, &gateway.ChatRequest{
		ID:      "chat-1", // the session: the next message with this id continues it
		Trigger: "submit-message",
		Messages: []gateway.UIMessage{{ID: "m1", Role: "user",
			Parts: []gateway.UIPart{{Type: "text", Text: "Say hello"}}}},
	})
	if err != nil {
		panic(err)
	}
	defer stream.Close()
	var text strings.Builder
	for {
		typ, part, err := stream.Next()
		if errors.Is(err, gateway.ErrStreamEnded) {
			break
		}
		if err != nil {
			panic(err)
		}
		switch typ {
		case "text-delta":
			var d struct{ Delta string }
			_ = json.Unmarshal(part, &d)
			text.WriteString(d.Delta)
		case "finish":
			var f struct{ FinishReason string }
			_ = json.Unmarshal(part, &f)
			fmt.Println("text:", text.String())
			fmt.Println("finish:", f.FinishReason)
		}
	}
	// Output:
	// text: Hello, world
	// finish: stop
}
