package main

import (
	"context"
	"encoding/json"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/llmworker/llmworker/internal/leaf/natsutil"
	recorded "github.com/llmworker/llmworker/internal/replay"
	"github.com/llmworker/llmworker/internal/service"
	"github.com/llmworker/llmworker/internal/service/ingestsvc"
	"github.com/llmworker/llmworker/pkg/events"
)

func TestReplayFlag(t *testing.T) {
	svc := &ingestsvc.Service{}
	_, err := service.Parse(svc, nil, func(k string) string {
		if k == "LLMW_REPLAY" {
			return "1"
		}
		return ""
	}, io.Discard)
	if err != nil || !svc.Replay {
		t.Fatalf("$LLMW_REPLAY=1: replay %v, err %v", svc.Replay, err)
	}
	svc = &ingestsvc.Service{}
	if _, err = service.Parse(svc, nil, func(string) string { return "" }, io.Discard); err != nil || svc.Replay {
		t.Fatalf("default: replay %v, err %v", svc.Replay, err)
	}
}

// startRun runs the command against emb until the test ends and waits
// until the micro service answers.
func startRun(t *testing.T, emb *natsutil.Embedded, nc *nats.Conn, args ...string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	logs := &syncBuffer{}
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, append([]string{"--nats-url", emb.URL(), "--log-format", "text"}, args...), func(string) string { return "" }, logs)
	}()
	t.Cleanup(func() {
		cancel()
		if code := <-done; code != 0 {
			t.Errorf("exit %d\n%s", code, logs.String())
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := nc.Request("$SRV.PING.llmw-ingest", nil, 200*time.Millisecond); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("ingest not ready\n%s", logs.String())
		}
	}
}

// With --replay, a replay:<scenario> model streams the scenario's recorded
// tool calls through the real adapter, without any key or network.
func TestReplayModels(t *testing.T) {
	emb, err := natsutil.StartEmbedded(natsutil.EmbeddedOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(emb.Shutdown)
	nc, err := nats.Connect(emb.URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	startRun(t, emb, nc, "--replay", "--replay-pace", "0", "--instance", "rp")

	sc, err := recorded.Lookup("openai")
	if err != nil {
		t.Fatal(err)
	}
	sub, err := nc.SubscribeSync("llmw.llm.stream.rp1")
	if err != nil {
		t.Fatal(err)
	}
	reply, err := nc.RequestMsg(ceRequest(t, map[string]any{
		"request_id": "rp1",
		"model":      sc.ModelString(),
		"messages":   []any{map[string]any{"role": "user", "content": sc.Prompt}},
	}, "turn-rp"), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if code := reply.Header.Get("Nats-Service-Error-Code"); code != "" {
		t.Fatalf("error reply %s: %s", code, reply.Header.Get("Nats-Service-Error"))
	}
	var tools []string
	status := ""
	for status != "completed" && status != "failed" && status != "cancelled" {
		m, err := sub.NextMsg(10 * time.Second)
		if err != nil {
			t.Fatalf("stream: %v (tools so far %v)", err, tools)
		}
		env, err := events.DecodeEnvelope(m.Header, m.Data)
		if err != nil {
			t.Fatal(err)
		}
		var d struct {
			BlockType string `json:"block_type"`
			Name      string `json:"name"`
			Status    string `json:"status"`
		}
		if err := json.Unmarshal(env.Data, &d); err != nil {
			t.Fatal(err)
		}
		switch env.Type {
		case events.TypeLLMBlockStart:
			if d.BlockType == "tool_use" {
				tools = append(tools, d.Name)
			}
		case events.TypeLLMStatus:
			status = d.Status
		}
	}
	if status != "completed" {
		t.Errorf("status %q", status)
	}
	slices.Sort(tools)
	want := slices.Sorted(slices.Values(sc.Tools))
	if !slices.Equal(tools, want) {
		t.Errorf("tool calls %v, want the recorded %v", tools, want)
	}
}

// Without --replay the replay models do not exist.
func TestNoReplayWithoutFlag(t *testing.T) {
	emb, err := natsutil.StartEmbedded(natsutil.EmbeddedOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(emb.Shutdown)
	nc, err := nats.Connect(emb.URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	startRun(t, emb, nc, "--instance", "nr")
	reply, err := nc.RequestMsg(ceRequest(t, map[string]any{
		"request_id": "nr1",
		"model":      "replay:openai",
		"messages":   []any{map[string]any{"role": "user", "content": "hi"}},
	}, ""), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	code, msg := reply.Header.Get("Nats-Service-Error-Code"), reply.Header.Get("Nats-Service-Error")
	if code == "" || !strings.Contains(msg, "replay") {
		t.Errorf("want an error reply naming the replay provider, got code %q %q: %s", code, msg, reply.Data)
	}
}
