package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	cejs "github.com/cloudevents/sdk-go/protocol/nats_jetstream/v2"
	"github.com/cloudevents/sdk-go/v2/binding"
	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/cloudevents/sdk-go/v2/types"
	"github.com/nats-io/nats.go"
	"go.uber.org/goleak"

	"github.com/llmworker/llmworker/internal/leaf/fixtures"
	"github.com/llmworker/llmworker/internal/leaf/natsutil"
	"github.com/llmworker/llmworker/internal/service"
	"github.com/llmworker/llmworker/internal/service/ingestsvc"
	"github.com/llmworker/llmworker/internal/service/servicetest"
	"github.com/llmworker/llmworker/pkg/natstest"
)

// The genai SDK's dependencies start an opencensus worker in an init
// function; it is not ours and lives as long as the process.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("go.opencensus.io/stats/view.(*worker).start"))
}

const fixture = "openai-chat/single-tool-call-usage_gpt-4o-mini.sse"

// expected is what the recorded Chat Completions stream says, read with
// plain encoding/json.
type expected struct {
	text         string
	toolID       string
	toolName     string
	toolArgs     string
	finishReason string
	usage        map[string]int64
}

func readFixture(t *testing.T, body []byte) expected {
	t.Helper()
	var e expected
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok || line == "[DONE]" {
			continue
		}
		var chunk struct {
			Choices []struct {
				Delta struct {
					Content   *string `json:"content"`
					ToolCalls []struct {
						ID       string `json:"id"`
						Function struct {
							Name      string `json:"name"`
							Arguments string `json:"arguments"`
						} `json:"function"`
					} `json:"tool_calls"`
				} `json:"delta"`
				FinishReason *string `json:"finish_reason"`
			} `json:"choices"`
			Usage *struct {
				Prompt     int64 `json:"prompt_tokens"`
				Completion int64 `json:"completion_tokens"`
				Total      int64 `json:"total_tokens"`
			} `json:"usage"`
		}
		if err := json.Unmarshal([]byte(line), &chunk); err != nil {
			t.Fatalf("fixture chunk: %v", err)
		}
		for _, c := range chunk.Choices {
			if c.Delta.Content != nil {
				e.text += *c.Delta.Content
			}
			for _, tc := range c.Delta.ToolCalls {
				if tc.ID != "" {
					e.toolID = tc.ID
				}
				e.toolName += tc.Function.Name
				e.toolArgs += tc.Function.Arguments
			}
			if c.FinishReason != nil {
				e.finishReason = *c.FinishReason
			}
		}
		if chunk.Usage != nil {
			e.usage = map[string]int64{"input_tokens": chunk.Usage.Prompt, "output_tokens": chunk.Usage.Completion, "total_tokens": chunk.Usage.Total}
		}
	}
	if e.toolID == "" || e.toolName == "" || e.usage == nil || e.finishReason != "tool_calls" {
		t.Fatalf("fixture does not hold what this test expects: %+v", e)
	}
	return e
}

// replay is an OpenAI stand-in that answers every chat completion with the
// recorded stream and remembers the requests.
type replay struct {
	mu     sync.Mutex
	bodies [][]byte
	auth   []string
}

func (r *replay) handler(body []byte) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.bodies = append(r.bodies, b)
		r.auth = append(r.auth, req.Header.Get("Authorization"))
		r.mu.Unlock()
		if req.Method != http.MethodPost || !strings.HasSuffix(req.URL.Path, "/chat/completions") {
			http.Error(w, `{"error":{"message":"unexpected `+req.URL.Path+`"}}`, http.StatusNotFound)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write(body)
	})
}

// syncBuffer collects the subprocess's logs.
type syncBuffer = servicetest.SyncBuffer

func buildBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "ingest")
	gobin := filepath.Join(runtime.GOROOT(), "bin", "go")
	// Built as the images build it (deploy/build-images.sh): static, paths
	// trimmed, so that it shares its compiled packages with them and with
	// CI's go vet (.ci/run), and stripped, which links in about half the
	// time.
	cmd := exec.Command(gobin, "build", "-trimpath", "-ldflags=-s -w", "-o", bin, ".")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// ceRequest builds a binary-mode CloudEvent request with cloudevents/sdk-go
// and its NATS binding only.
func ceRequest(t *testing.T, data map[string]any, turnID string) *nats.Msg {
	t.Helper()
	ev := event.New()
	ev.SetID("req-" + strconv.FormatInt(time.Now().UnixNano(), 36))
	ev.SetSource("/test/blackbox")
	ev.SetType("llmw.llm.complete")
	if turnID != "" {
		ev.SetExtension("turnid", turnID)
	}
	if err := ev.SetData(event.ApplicationJSON, data); err != nil {
		t.Fatal(err)
	}
	var body bytes.Buffer
	hdr, err := cejs.WriteMsg(context.Background(), binding.ToMessage(&ev), &body)
	if err != nil {
		t.Fatal(err)
	}
	return &nats.Msg{Subject: "llmw.llm.complete", Header: hdr, Data: body.Bytes()}
}

func TestBlackBoxOpenAIStream(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	raw, err := fixtures.SSE(fixture) // the repo's copy (internal/leaf/fixtures)
	if err != nil {
		t.Fatal(err)
	}
	want := readFixture(t, raw)
	rp := &replay{}
	srv := httptest.NewServer(rp.handler(raw))
	t.Cleanup(srv.Close)

	emb, err := natsutil.StartEmbedded(natsutil.EmbeddedOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(emb.Shutdown)

	bin := buildBinary(t)
	logs := &syncBuffer{}
	cmd := exec.Command(bin, "--instance", "bb", "--log-format", "json")
	// A clean environment: no real keys leak in, and the provider keys the
	// test leaves out must be refused.
	cmd.Env = []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + t.TempDir(),
		"NATS_URL=" + emb.URL(),
		"OPENAI_API_KEY=test-key",
		"OPENAI_BASE_URL=" + srv.URL + "/v1",
	}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = cmd.Process.Kill()
			<-exited
		}
	})

	nc, err := nats.Connect(emb.URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)

	// Ready when the micro service answers PING.
	natstest.EventuallyWithin(t, 30*time.Second, "ingest answering $SRV.PING", func() bool {
		select {
		case err := <-exited:
			t.Fatalf("ingest exited: %v\n%s", err, logs.String())
		default:
		}
		_, err := nc.Request("$SRV.PING.llmw-ingest", nil, 200*time.Millisecond)
		return err == nil
	})

	sub, err := nc.SubscribeSync("llmw.llm.stream.bb1")
	if err != nil {
		t.Fatal(err)
	}
	reqData := map[string]any{
		"request_id": "bb1",
		"model":      "openai:gpt-4o-mini",
		"messages":   []any{map[string]any{"role": "user", "content": "What is the capital of the UK?"}},
		"tools": []any{map[string]any{"name": "get_capital", "description": "capital of a country",
			"input_schema": map[string]any{"type": "object", "properties": map[string]any{"country": map[string]any{"type": "string"}}}}},
	}
	reply, err := nc.RequestMsg(ceRequest(t, reqData, "turn-1"), 10*time.Second)
	if err != nil {
		t.Fatalf("request: %v\n%s", err, logs.String())
	}
	if code := reply.Header.Get("Nats-Service-Error-Code"); code != "" {
		t.Fatalf("error reply %s: %s", code, reply.Header.Get("Nats-Service-Error"))
	}
	var rep struct {
		RequestID     string `json:"request_id"`
		StreamSubject string `json:"stream_subject"`
	}
	if err := json.Unmarshal(reply.Data, &rep); err != nil || rep.RequestID != "bb1" || rep.StreamSubject != "llmw.llm.stream.bb1" {
		t.Fatalf("reply %s (%v)", reply.Data, err)
	}

	// Read the stream with cloudevents/sdk-go alone.
	var got []event.Event
	for {
		m, err := sub.NextMsg(10 * time.Second)
		if err != nil {
			t.Fatalf("stream: %v after %d events\n%s", err, len(got), logs.String())
		}
		msg := cejs.NewMessage(m)
		if msg.ReadEncoding() != binding.EncodingBinary {
			t.Fatalf("event %d not in binary content mode", len(got)+1)
		}
		ev, err := binding.ToEvent(context.Background(), msg)
		if err != nil {
			t.Fatalf("event %d: %v", len(got)+1, err)
		}
		if err := ev.Validate(); err != nil {
			t.Fatalf("event %d: %v", len(got)+1, err)
		}
		got = append(got, *ev)
		if ev.Type() == "llmw.llm.status" {
			var st struct{ Status string }
			_ = json.Unmarshal(ev.Data(), &st)
			if st.Status != "started" {
				break
			}
		}
	}

	type blockData struct {
		Index      *int    `json:"index"`
		BlockType  string  `json:"block_type"`
		ID         string  `json:"id"`
		Name       string  `json:"name"`
		Text       *string `json:"text"`
		InputJSON  *string `json:"input_json"`
		StopReason *string `json:"stop_reason"`
		Status     string  `json:"status"`
	}
	var text, args, toolID, toolName, stopReason string
	var usage map[string]int64
	ids := map[string]bool{}
	for i, ev := range got {
		seq, err := types.ToInteger(ev.Extensions()["seq"])
		if err != nil || int(seq) != i+1 {
			t.Errorf("event %d: seq %v (%v), want %d", i+1, ev.Extensions()["seq"], err, i+1)
		}
		if ids[ev.ID()] {
			t.Errorf("event %d: id %q repeated", i+1, ev.ID())
		}
		ids[ev.ID()] = true
		if ev.Source() != "/llmw/ingest/bb" || ev.Subject() != "turn-1" || ev.Extensions()["turnid"] != "turn-1" {
			t.Errorf("event %d: source %q subject %q turnid %v", i+1, ev.Source(), ev.Subject(), ev.Extensions()["turnid"])
		}
		if ev.DataContentType() != "application/json" || ev.Time().IsZero() {
			t.Errorf("event %d: datacontenttype %q time %v", i+1, ev.DataContentType(), ev.Time())
		}
		var d blockData
		if err := json.Unmarshal(ev.Data(), &d); err != nil {
			t.Fatalf("event %d data: %v", i+1, err)
		}
		switch ev.Type() {
		case "llmw.llm.status":
			switch {
			case i == 0 && d.Status != "started":
				t.Errorf("first status %q", d.Status)
			case i == len(got)-1 && d.Status != "completed":
				t.Errorf("last status %q, want completed\n%s", d.Status, logs.String())
			case i != 0 && i != len(got)-1:
				t.Errorf("status %q in the middle of the stream", d.Status)
			}
		case "llmw.llm.block.start":
			if d.BlockType == "tool_use" {
				toolID, toolName = d.ID, d.Name
			}
		case "llmw.llm.block.delta":
			if d.Text != nil {
				text += *d.Text
			}
			if d.InputJSON != nil {
				args += *d.InputJSON
			}
		case "llmw.llm.block.stop":
			if d.BlockType == "tool_use" && d.StopReason != nil {
				stopReason = *d.StopReason
			}
		case "llmw.llm.usage":
			if err := json.Unmarshal(ev.Data(), &usage); err != nil {
				t.Fatal(err)
			}
		}
	}
	if got[0].Type() != "llmw.llm.status" {
		t.Errorf("first event %s", got[0].Type())
	}
	if text != want.text || toolID != want.toolID || toolName != want.toolName || args != want.toolArgs {
		t.Errorf("stream says text %q, tool %s %s(%s); fixture says text %q, tool %s %s(%s)",
			text, toolID, toolName, args, want.text, want.toolID, want.toolName, want.toolArgs)
	}
	if stopReason != "tool_use" {
		t.Errorf("tool_use block stop reason %q, want tool_use (finish_reason %q)", stopReason, want.finishReason)
	}
	for k, v := range want.usage {
		if usage[k] != v {
			t.Errorf("usage %s = %d, want %d (%v)", k, usage[k], v, usage)
		}
	}

	// The provider got the request the SDK builds, with the key from the
	// environment.
	rp.mu.Lock()
	if len(rp.bodies) != 1 || rp.auth[0] != "Bearer test-key" {
		t.Errorf("replay saw %d requests, auth %v", len(rp.bodies), rp.auth)
	} else {
		var body struct {
			Model    string `json:"model"`
			Stream   bool   `json:"stream"`
			Messages []struct {
				Role    string `json:"role"`
				Content any    `json:"content"`
			} `json:"messages"`
			Tools []struct {
				Function struct {
					Name string `json:"name"`
				} `json:"function"`
			} `json:"tools"`
		}
		if err := json.Unmarshal(rp.bodies[0], &body); err != nil {
			t.Error(err)
		}
		if body.Model != "gpt-4o-mini" || !body.Stream || len(body.Messages) != 1 || body.Messages[0].Role != "user" ||
			len(body.Tools) != 1 || body.Tools[0].Function.Name != "get_capital" {
			t.Errorf("provider request %s", rp.bodies[0])
		}
	}
	rp.mu.Unlock()

	// Refusals say which: no such provider, and no key for anthropic.
	for _, c := range []struct{ model, code, says string }{
		{"mistral:large", "404", "unknown provider"},
		{"anthropic:claude-sonnet-4-5", "401", "ANTHROPIC_API_KEY"},
	} {
		r, err := nc.RequestMsg(ceRequest(t, map[string]any{"request_id": "x", "model": c.model, "messages": []any{}}, ""), 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if code, desc := r.Header.Get("Nats-Service-Error-Code"), r.Header.Get("Nats-Service-Error"); code != c.code || !strings.Contains(desc, c.says) {
			t.Errorf("%s: reply %s %q, want %s saying %q", c.model, code, desc, c.code, c.says)
		}
	}

	// SIGTERM drains and exits 0.
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		stopped = true
		if err != nil {
			t.Errorf("exit: %v\n%s", err, logs.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("ingest did not exit on SIGTERM\n%s", logs.String())
	}
	// Structured logs: one JSON record per stream with its outcome.
	found := false
	for line := range strings.SplitSeq(logs.String(), "\n") {
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) != nil {
			continue
		}
		if rec["msg"] == "stream ended" && rec["request_id"] == "bb1" {
			found = rec["outcome"] == "completed" && rec["provider"] == "openai" && rec["model"] == "gpt-4o-mini" && rec["events"] == float64(len(got))
		}
	}
	if !found {
		t.Errorf("no log record of the stream's outcome:\n%s", logs.String())
	}
}

func TestFlags(t *testing.T) {
	env := map[string]string{"NATS_URL": "nats://x:4222", "LLMW_PREFIX": "p1", "LLMW_IDLE_TIMEOUT": "90s", "LLMW_INSTANCE": "i9"}
	svc := &ingestsvc.Service{}
	c, err := service.Parse(svc, []string{"--prefix", "p2"}, func(k string) string { return env[k] }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.NATSURL != "nats://x:4222" || c.Prefix != "p2" || svc.IdleTimeout != 90*time.Second || c.Instance != "i9" || c.Drain != 25*time.Second {
		t.Errorf("%+v %+v", c, svc.Options)
	}
	if _, err := service.Parse(&ingestsvc.Service{}, nil, func(k string) string {
		if k == "LLMW_IDLE_TIMEOUT" {
			return "soon"
		}
		return ""
	}, io.Discard); !errors.Is(err, service.ErrUsage) || !strings.Contains(err.Error(), "LLMW_IDLE_TIMEOUT") {
		t.Errorf("bad $LLMW_IDLE_TIMEOUT: %v", err)
	}
	if _, err := service.Parse(&ingestsvc.Service{}, []string{"extra"}, func(string) string { return "" }, io.Discard); err == nil {
		t.Error("extra argument accepted")
	}
	if code := run(context.Background(), []string{"--log-format", "xml"}, func(string) string { return "" }, io.Discard); code != 2 {
		t.Errorf("bad log format: exit %d", code)
	}
}

// run is the command's main with its environment.
func run(ctx context.Context, args []string, getenv func(string) string, stderr io.Writer) int {
	return service.Main(ctx, &ingestsvc.Service{}, args, service.IO{Getenv: getenv, Stdout: io.Discard, Stderr: stderr})
}

// run with an embedded server (no NATS_URL) serves until its context ends.
func TestRunEmbeddedUntilCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	logs := &syncBuffer{}
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"--instance", "emb", "--log-format", "text"}, func(string) string { return "" }, logs)
	}()
	defer func() {
		if t.Failed() {
			t.Logf("logs:\n%s", logs.String())
		}
	}()
	natstest.EventuallyWithin(t, 30*time.Second, "ingest started", func() bool {
		return strings.Contains(logs.String(), "ingest started")
	})
	if !strings.Contains(logs.String(), "embedded NATS server") {
		t.Errorf("no embedded server logged:\n%s", logs.String())
	}
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Errorf("exit %d\n%s", code, logs.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("run did not return")
	}
}
