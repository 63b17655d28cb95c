package ingestsvc_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/llmworker/llmworker/internal/leaf/fixtures"
	"github.com/llmworker/llmworker/internal/replay"
	"github.com/llmworker/llmworker/internal/service"
	"github.com/llmworker/llmworker/internal/service/ingestsvc"
	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/ingest"
	"github.com/llmworker/llmworker/pkg/llm"
	"github.com/llmworker/llmworker/pkg/natstest"
)

func TestMain(m *testing.M) {
	// The genai SDK's dependencies (through the built-in providers) start
	// an opencensus worker in an init function; it is not ours.
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("go.opencensus.io/stats/view.(*worker).start"))
}

// recordedText is the answer of a one-step OpenAI Responses recording,
// read from the fixture bytes: its output_text deltas.
func recordedText(t *testing.T, name string) string {
	t.Helper()
	b, err := fixtures.SSE(name)
	if err != nil {
		t.Fatal(err)
	}
	var text strings.Builder
	for _, line := range strings.Split(strings.ReplaceAll(string(b), "\r\n", "\n"), "\n") {
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			continue
		}
		var ev struct {
			Type  string `json:"type"`
			Delta string `json:"delta"`
		}
		if json.Unmarshal([]byte(data), &ev) == nil && ev.Type == "response.output_text.delta" {
			text.WriteString(ev.Delta)
		}
	}
	return text.String()
}

// With --replay the service answers a completion request for a replay
// model with the recording, through the real adapter; a Stop while the
// stream runs lets it finish, whole, before it returns.
func TestAnswersACompletionAndDrains(t *testing.T) {
	srv := natstest.Start(t, natstest.Options{})
	sc, err := replay.Lookup("openai-reasoning")
	if err != nil {
		t.Fatal(err)
	}
	want := recordedText(t, sc.Steps[0])
	if want == "" {
		t.Fatalf("the recording %s has no text", sc.Steps[0])
	}
	// Paced, so that the stream still runs when Stop is called.
	svc := &ingestsvc.Service{Options: ingestsvc.Options{Replay: true, ReplayPace: time.Millisecond, Getenv: func(string) string { return "" }}}
	root, cancel := context.WithCancel(context.Background())
	defer cancel()
	st, err := svc.Start(root, service.Env{NC: srv.NC, Instance: "i1", Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}

	c := ingest.NewClient(srv.NC, ingest.ClientOptions{})
	defer c.Close()
	s, err := c.Stream(natstest.Context(t), &llm.Request{RequestID: "r1", Model: sc.ModelString(), Messages: []events.Message{events.UserText(sc.Prompt)}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if !s.Next() {
		t.Fatalf("no first event: %v", s.Err())
	}
	evs := []events.Event{s.Current()}
	stopped := make(chan error, 1)
	go func() {
		sctx, scancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer scancel()
		stopped <- st.Stop(sctx)
	}()
	for s.Next() {
		evs = append(evs, s.Current())
	}
	if err := <-stopped; err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if err := llm.CheckWellFormed(evs); err != nil {
		t.Fatal(err)
	}
	if last, ok := evs[len(evs)-1].(events.StatusEvent); !ok || last.Status != events.StatusCompleted {
		t.Fatalf("the stream ended with %#v, want completed", evs[len(evs)-1])
	}
	textBlocks := map[int]bool{}
	var got strings.Builder
	for _, ev := range evs {
		switch ev := ev.(type) {
		case events.BlockStart:
			textBlocks[ev.Index] = ev.BlockType == events.BlockText
		case events.BlockDelta:
			if textBlocks[ev.Index] {
				got.WriteString(ev.Content)
			}
		}
	}
	if got.String() != want {
		t.Errorf("text %q, want the recording's %q", got.String(), want)
	}
}
