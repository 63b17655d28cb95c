package gatewaysvc_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/llmworker/llmworker/internal/service"
	"github.com/llmworker/llmworker/internal/service/gatewaysvc"
	"github.com/llmworker/llmworker/pkg/gateway"
	"github.com/llmworker/llmworker/pkg/ingest"
	"github.com/llmworker/llmworker/pkg/llm/llmtest"
	"github.com/llmworker/llmworker/pkg/natstest"
	"github.com/llmworker/llmworker/pkg/turn"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// stopper is what ingest and turn services have in common.
type stopper interface {
	Start(context.Context) error
	Stop(context.Context) error
}

// run starts s and stops it when the test ends.
func run(t *testing.T, s stopper) {
	t.Helper()
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := s.Stop(ctx); err != nil {
			t.Error(err)
		}
	})
}

// The service serves POST /api/chat: a chat message becomes a turn on the
// turn service, whose answer streams back as the UI message stream's text
// parts; Stop ends the server.
func TestServesAChatAndStops(t *testing.T) {
	srv := natstest.Start(t, natstest.Options{})
	const answer = "It is sunny in Oslo."
	in, err := ingest.New(srv.NC, ingest.Config{Instance: "i1", Logger: quiet(),
		Providers: map[string]ingest.Factory{"script": ingest.Static(llmtest.NewScripted(llmtest.TextStep("It is sunny ", "in Oslo.")))}})
	if err != nil {
		t.Fatal(err)
	}
	run(t, in)
	tn, err := turn.New(srv.NC, turn.Config{Instance: "turn-1", Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	run(t, tn)

	svc := &gatewaysvc.Service{Options: gatewaysvc.Options{Model: "script:m"}}
	root, cancel := context.WithCancel(context.Background())
	defer cancel()
	st, err := svc.Start(root, service.Env{NC: srv.NC, Instance: "gw1", Log: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(svc.URL, "http://127.0.0.1:") {
		t.Errorf("serves on %q, want a random localhost port", svc.URL)
	}

	c := &gateway.Client{URL: svc.URL}
	s, err := c.Chat(natstest.Context(t), &gateway.ChatRequest{ID: "chat-1", Messages: []gateway.UIMessage{
		{ID: "u1", Role: "user", Parts: []gateway.UIPart{{Type: "text", Text: "Weather in Oslo?"}}}}})
	if err != nil {
		t.Fatal(err)
	}
	var text strings.Builder
	var types []string
	for {
		typ, raw, err := s.Next()
		if errors.Is(err, gateway.ErrStreamEnded) {
			break
		}
		if err != nil {
			t.Fatalf("stream after %v: %v", types, err)
		}
		types = append(types, typ)
		if typ == "text-delta" {
			var p struct {
				Delta string `json:"delta"`
			}
			if err := json.Unmarshal(raw, &p); err != nil {
				t.Fatal(err)
			}
			text.WriteString(p.Delta)
		}
	}
	_ = s.Close()
	if text.String() != answer {
		t.Errorf("streamed text %q (parts %v), want %q", text.String(), types, answer)
	}
	if len(types) == 0 || types[len(types)-1] != "finish" {
		t.Errorf("parts %v, want them to end with finish", types)
	}

	sctx, scancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer scancel()
	if err := st.Stop(sctx); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if _, err := (&gateway.Client{URL: svc.URL}).HTTPGet(natstest.Context(t), "/"); err == nil {
		t.Error("still serving after Stop")
	}
}

// An address already taken is refused as a usage error that says so and
// names the flag to change.
func TestAddressInUse(t *testing.T) {
	srv := natstest.Start(t, natstest.Options{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	svc := &gatewaysvc.Service{Options: gatewaysvc.Options{HTTP: ln.Addr().String()}}
	st, err := svc.Start(context.Background(), service.Env{NC: srv.NC, Instance: "gw1", Log: quiet()})
	if err == nil {
		_ = st.Stop(context.Background())
		t.Fatal("started on an address in use")
	}
	if !errors.Is(err, service.ErrUsage) || !strings.Contains(err.Error(), "already in use") || !strings.Contains(err.Error(), "--http") {
		t.Errorf("error %v, want a usage error naming --http", err)
	}
}
