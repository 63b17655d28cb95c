package providertest_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/llmworker/llmworker/pkg/provider/providertest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestChunksToSSE(t *testing.T) {
	in := []byte("{\"type\":\"a\",\"x\":1}\n\n{\"type\":\"b\"}\n")
	cases := []struct {
		f    providertest.Format
		want string
	}{
		{providertest.FormatOpenAIChat, "data: {\"type\":\"a\",\"x\":1}\n\ndata: {\"type\":\"b\"}\n\ndata: [DONE]\n\n"},
		{providertest.FormatOpenAIResponses, "event: a\ndata: {\"type\":\"a\",\"x\":1}\n\nevent: b\ndata: {\"type\":\"b\"}\n\n"},
		{providertest.FormatAnthropic, "event: a\ndata: {\"type\":\"a\",\"x\":1}\n\nevent: b\ndata: {\"type\":\"b\"}\n\n"},
		{providertest.FormatGemini, "data: {\"type\":\"a\",\"x\":1}\r\n\r\ndata: {\"type\":\"b\"}\r\n\r\n"},
	}
	for _, c := range cases {
		got, err := providertest.ChunksToSSE(c.f, in)
		if err != nil {
			t.Fatalf("%v: %v", c.f, err)
		}
		if string(got) != c.want {
			t.Errorf("%v: got %q, want %q", c.f, got, c.want)
		}
	}
	if _, err := providertest.ChunksToSSE(providertest.FormatUnknown, in); !errors.Is(err, providertest.ErrUnknownFormat) {
		t.Errorf("unknown format: err = %v", err)
	}
	if _, err := providertest.ChunksToSSE(providertest.FormatOpenAIResponses, []byte("[1]\n")); !errors.Is(err, providertest.ErrBadChunk) {
		t.Errorf("bad chunk: err = %v", err)
	}
}

func TestSplitSSE(t *testing.T) {
	body := "event: e1\r\ndata: {\"a\":1}\r\n\r\n: comment\r\ndata: x\r\ndata: y\r\n\r\ndata: [DONE]\n\n"
	got := providertest.SplitSSE([]byte(body))
	want := []providertest.SSEEvent{{Event: "e1", Data: `{"a":1}`}, {Data: "x\ny"}, {Data: "[DONE]"}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("got %q, want %q", got, want)
	}
	lines := providertest.ChunkLines([]byte(body))
	if len(lines) != 2 || string(lines[0]) != `{"a":1}` {
		t.Fatalf("ChunkLines = %q", lines)
	}
}

// Every fixture loads, and every .chunks.jsonl file round-trips: the data
// payloads of the rebuilt SSE are exactly the file's lines.
func TestLoadAllFixtures(t *testing.T) {
	for _, dir := range []string{"openai-chat", "openai-responses", "anthropic", "gemini"} {
		for _, p := range providertest.Fixtures(t, dir) {
			body := providertest.MustLoadFixture(t, p)
			if len(providertest.SplitSSE(body)) == 0 {
				t.Errorf("%s: no SSE events", filepath.Base(p))
			}
			if strings.HasSuffix(p, ".chunks.jsonl") {
				raw, err := os.ReadFile(p)
				if err != nil {
					t.Fatal(err)
				}
				var lines []string
				for _, l := range strings.Split(string(raw), "\n") {
					if strings.TrimSpace(l) != "" {
						lines = append(lines, l)
					}
				}
				var datas []string
				for _, ev := range providertest.SplitSSE(body) {
					if ev.Data != "[DONE]" {
						datas = append(datas, ev.Data)
					}
				}
				if strings.Join(lines, "\n") != strings.Join(datas, "\n") {
					t.Errorf("%s: rebuilt SSE data differs from the file's lines", filepath.Base(p))
				}
			}
		}
	}
}

func TestServerScriptAndRecording(t *testing.T) {
	srv := providertest.NewServer(t,
		providertest.Status(429, "0", `{"error":{"message":"slow down"}}`),
		providertest.SSE([]byte("data: 1\n\n")),
	)
	for i, want := range []int{429, 200, 200} {
		resp, err := http.Post(srv.URL()+"/v1/x?q=1", "application/json", strings.NewReader(fmt.Sprintf(`{"n":%d}`, i)))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Fatalf("request %d: status %d, want %d", i, resp.StatusCode, want)
		}
		if want == 429 && resp.Header.Get("Retry-After") != "0" {
			t.Errorf("Retry-After = %q", resp.Header.Get("Retry-After"))
		}
		if want == 200 && (string(b) != "data: 1\n\n" || resp.Header.Get("Content-Type") != "text/event-stream") {
			t.Errorf("body %q, content type %q", b, resp.Header.Get("Content-Type"))
		}
	}
	reqs := srv.Requests()
	if len(reqs) != 3 || srv.RequestCount() != 3 {
		t.Fatalf("%d requests", len(reqs))
	}
	if reqs[1].Path != "/v1/x" || reqs[1].Query != "q=1" || string(reqs[1].Body) != `{"n":1}` {
		t.Errorf("request 1 = %+v", reqs[1])
	}
	if string(srv.LastRequest().Body) != `{"n":2}` {
		t.Errorf("last = %q", srv.LastRequest().Body)
	}
	srv.SetScript(providertest.Response{Body: []byte("abcdef"), ChunkSize: 2})
	resp, err := http.Get(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "abcdef" {
		t.Errorf("chunked body %q", b)
	}
}

func TestServerStallReleasedOnClose(t *testing.T) {
	srv := providertest.Start(providertest.Response{Body: []byte("data: x\n\n"), Stall: true})
	resp, err := http.Get(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 9)
	if _, err := io.ReadFull(resp.Body, buf); err != nil || !bytes.Equal(buf, []byte("data: x\n\n")) {
		t.Fatalf("read %q, %v", buf, err)
	}
	done := make(chan struct{})
	go func() { _, _ = io.ReadAll(resp.Body); close(done) }()
	srv.Close() // must not hang on the stalled handler
	<-done
	resp.Body.Close()
	srv.Close() // idempotent
}

func TestEmptyScript404(t *testing.T) {
	srv := providertest.NewServer(t)
	resp, err := http.Get(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 404 {
		t.Fatalf("status %d", resp.StatusCode)
	}
}

func ExampleChunksToSSE() {
	sse, _ := providertest.ChunksToSSE(providertest.FormatOpenAIResponses, []byte(`{"type":"response.created"}`+"\n"))
	fmt.Printf("%q\n", sse)
	// Output: "event: response.created\ndata: {\"type\":\"response.created\"}\n\n"
}

func ExampleServer() {
	srv := providertest.Start(providertest.SSE([]byte("data: hi\n\n")))
	defer srv.Close()
	resp, _ := http.Post(srv.URL()+"/chat/completions", "application/json", strings.NewReader(`{"model":"m"}`))
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	fmt.Printf("%s|%s %s\n", b, srv.LastRequest().Path, srv.LastRequest().Body)
	// Output:
	// data: hi
	//
	// |/chat/completions {"model":"m"}
}
