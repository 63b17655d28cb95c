package providertest

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/llmworker/llmworker/internal/leaf/fixtures"
)

// Format is the wire format of a recorded stream; it decides how a
// .chunks.jsonl file is turned back into SSE.
type Format int

const (
	FormatUnknown Format = iota
	// FormatOpenAIChat: "data: <line>\n\n" per chunk, then "data: [DONE]\n\n".
	FormatOpenAIChat
	// FormatOpenAIResponses: "event: <type>\ndata: <line>\n\n", no [DONE].
	FormatOpenAIResponses
	// FormatAnthropic: "event: <type>\ndata: <line>\n\n", no [DONE].
	FormatAnthropic
	// FormatGemini: "data: <line>\r\n\r\n" (alt=sse uses CRLF), no [DONE].
	FormatGemini
	// FormatBedrock: Amazon Bedrock ConverseStream chunks, framed in the
	// binary event stream (EventStream).
	FormatBedrock
)

func (f Format) String() string {
	switch f {
	case FormatOpenAIChat:
		return "openai-chat"
	case FormatOpenAIResponses:
		return "openai-responses"
	case FormatAnthropic:
		return "anthropic"
	case FormatGemini:
		return "gemini"
	case FormatBedrock:
		return "bedrock"
	}
	return "unknown"
}

// FormatOf returns the wire format of a fixture from the name of its
// directory (openai-chat, openai-responses, anthropic, gemini).
func FormatOf(path string) Format {
	switch filepath.Base(filepath.Dir(path)) {
	case "openai-chat":
		return FormatOpenAIChat
	case "openai-responses":
		return FormatOpenAIResponses
	case "anthropic":
		return FormatAnthropic
	case "gemini":
		return FormatGemini
	case "bedrock":
		return FormatBedrock
	}
	return FormatUnknown
}

// FixturesDir returns the fixture directory: $LLMW_FIXTURES if set, else
// the first of internal/leaf/fixtures (the copy in this repository, so tests work
// from a clean clone), testdata/fixtures and fixtures
// (holding a MANIFEST.md) found in the working directory or one of its
// parents.
func FixturesDir() (string, error) {
	if d := os.Getenv("LLMW_FIXTURES"); d != "" {
		if st, err := os.Stat(d); err == nil && st.IsDir() {
			return d, nil
		}
		return "", fmt.Errorf("%w: LLMW_FIXTURES=%q is not a directory", ErrFixturesNotFound, d)
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrFixturesNotFound, err)
	}
	for d := wd; ; d = filepath.Dir(d) {
		for _, sub := range []string{"internal/leaf/fixtures", "testdata/fixtures", "fixtures"} {
			c := filepath.Join(d, sub)
			if _, err := os.Stat(filepath.Join(c, "MANIFEST.md")); err == nil {
				return c, nil
			}
		}
		if filepath.Dir(d) == d {
			break
		}
	}
	return "", fmt.Errorf("%w (searched from %s; set LLMW_FIXTURES)", ErrFixturesNotFound, wd)
}

// Fixtures returns the paths of the recorded streams (*.sse and
// *.chunks.jsonl) in the fixture subdirectory sub (e.g. "openai-chat"),
// sorted. It fails the test when the directory is missing or empty.
func Fixtures(t testing.TB, sub string) []string {
	t.Helper()
	root, err := FixturesDir()
	if err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(filepath.Join(root, sub))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		n := e.Name()
		if !e.IsDir() && (strings.HasSuffix(n, ".sse") || strings.HasSuffix(n, ".chunks.jsonl")) {
			out = append(out, filepath.Join(root, sub, n))
		}
	}
	sort.Strings(out)
	if len(out) == 0 {
		t.Fatalf("no fixtures in %s", filepath.Join(root, sub))
	}
	return out
}

// LoadFixture returns the SSE body of a fixture: a .sse file's bytes as they
// are, a .chunks.jsonl file rebuilt with ChunksToSSE in the format of its
// directory (a bedrock one framed with EventStream instead). A relative path is taken relative to FixturesDir.
func LoadFixture(path string) ([]byte, error) {
	if !filepath.IsAbs(path) {
		root, err := FixturesDir()
		if err != nil {
			return nil, err
		}
		path = filepath.Join(root, path)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if strings.HasSuffix(path, ".chunks.jsonl") {
		if FormatOf(path) == FormatBedrock {
			return EventStream(b)
		}
		return ChunksToSSE(FormatOf(path), b)
	}
	return b, nil
}

// MustLoadFixture is LoadFixture that fails the test on error.
func MustLoadFixture(t testing.TB, path string) []byte {
	t.Helper()
	b, err := LoadFixture(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// ChunkLines returns the non-empty lines of a .chunks.jsonl file, or the
// data payloads of an SSE body (without "[DONE]"), in order. Tests use it to
// derive expectations from a fixture with plain encoding/json.
func ChunkLines(body []byte) [][]byte {
	var out [][]byte
	if isSSE(body) {
		for _, ev := range SplitSSE(body) {
			if ev.Data != "" && ev.Data != "[DONE]" {
				out = append(out, []byte(ev.Data))
			}
		}
		return out
	}
	for _, l := range bytes.Split(body, []byte("\n")) {
		l = bytes.TrimSpace(l)
		if len(l) > 0 {
			out = append(out, l)
		}
	}
	return out
}

func isSSE(b []byte) bool {
	b = bytes.TrimLeft(b, " \t\r\n")
	return bytes.HasPrefix(b, []byte("data:")) || bytes.HasPrefix(b, []byte("event:")) ||
		bytes.HasPrefix(b, []byte(":")) || bytes.HasPrefix(b, []byte("id:")) || bytes.HasPrefix(b, []byte("retry:"))
}

// SSEEvent is one parsed server-sent event.
type SSEEvent struct {
	Event string // the event: field, "" when absent
	Data  string // data: lines joined with "\n"
}

// SplitSSE parses an SSE body (LF, CRLF or CR line endings) into its events,
// following the WHATWG rules closely enough for recorded provider bodies.
func SplitSSE(body []byte) []SSEEvent {
	s := strings.ReplaceAll(string(body), "\r\n", "\n")
	s = strings.ReplaceAll(s, "\r", "\n")
	var out []SSEEvent
	var cur SSEEvent
	var data []string
	have := false
	flush := func() {
		if have {
			cur.Data = strings.Join(data, "\n")
			out = append(out, cur)
		}
		cur, data, have = SSEEvent{}, nil, false
	}
	for _, line := range strings.Split(s, "\n") {
		if line == "" {
			flush()
			continue
		}
		if strings.HasPrefix(line, ":") {
			continue
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "event":
			cur.Event, have = value, true
		case "data":
			data, have = append(data, value), true
		}
	}
	flush()
	return out
}

// ChunksToSSE rebuilds the SSE body of a .chunks.jsonl file (one JSON chunk
// per line, event lines and [DONE] dropped) with the rules of MANIFEST.md;
// the rules live in internal/leaf/fixtures, which the replay demo uses too.
func ChunksToSSE(f Format, jsonl []byte) ([]byte, error) {
	if f == FormatUnknown || f.String() == "unknown" {
		return nil, fmt.Errorf("%w: %v", ErrUnknownFormat, f)
	}
	b, err := fixtures.ChunksToSSE(f.String(), jsonl)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadChunk, err)
	}
	return b, nil
}
