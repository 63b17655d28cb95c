package gemini

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/llmworker/llmworker/pkg/llm"
)

// The genai SDK retries only when HTTPOptions.RetryOptions is set, and then
// without regard to Retry-After; so the adapter retries itself, in the HTTP
// transport, where the status and headers of a rejected request are still at
// hand. It only ever retries before a response body is handed to the SDK,
// that is before the first byte of a stream.

const (
	defaultMaxRetries = 2
	baseBackoff       = 500 * time.Millisecond
	maxBackoff        = 8 * time.Second
	// maxRetryAfter bounds how long a Retry-After may make us wait; a
	// longer one is returned to the caller as the error it is.
	maxRetryAfter = 60 * time.Second
)

type retryTransport struct {
	base       http.RoundTripper
	maxRetries int
}

func (t *retryTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	tp, _ := ctx.Value(tapKey{}).(*tap)
	for attempt := 0; ; attempt++ {
		resp, err := t.base.RoundTrip(req)
		if attempt >= t.maxRetries || ctx.Err() != nil || !retryable(resp, err) {
			if err == nil && tp != nil && resp.StatusCode/100 == 2 {
				tp.opened.Store(true)
				resp.Body = &tapBody{rc: resp.Body, t: tp}
			}
			tp.refused(resp)
			return resp, err
		}
		delay, ok := retryAfter(resp)
		if !ok {
			delay = backoff(attempt)
		} else if delay > maxRetryAfter {
			tp.refused(resp)
			return resp, err
		}
		if resp != nil {
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
			_ = resp.Body.Close()
		}
		next := req.Clone(ctx)
		if req.Body != nil && req.Body != http.NoBody {
			if req.GetBody == nil {
				// The body cannot be replayed: no retry.
				return nil, err
			}
			b, gerr := req.GetBody()
			if gerr != nil {
				return nil, gerr
			}
			next.Body = b
		}
		timer := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil, ctx.Err()
		case <-timer.C:
		}
		req = next
	}
}

func retryable(resp *http.Response, err error) bool {
	if err != nil {
		return true // connection refused, reset, DNS: nothing was streamed
	}
	switch c := resp.StatusCode; {
	case c == http.StatusRequestTimeout, c == http.StatusTooManyRequests, c >= 500:
		return true
	}
	return false
}

// retryAfter reads Retry-After-Ms or Retry-After (seconds or an HTTP date).
func retryAfter(resp *http.Response) (time.Duration, bool) {
	if resp == nil {
		return 0, false
	}
	if v := resp.Header.Get("Retry-After-Ms"); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms >= 0 {
			return time.Duration(ms * float64(time.Millisecond)), true
		}
	}
	v := resp.Header.Get("Retry-After")
	if v == "" {
		return 0, false
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil && s >= 0 {
		return time.Duration(s * float64(time.Second)), true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(0, time.Until(t)), true
	}
	return 0, false
}

func backoff(attempt int) time.Duration {
	d := min(baseBackoff<<attempt, maxBackoff)
	return d - time.Duration(rand.Int64N(int64(d/4)+1))
}

// tap watches the raw SSE lines of one stream for what the SDK drops: in the
// Gemini API backend, genai's response converter does not copy a
// candidate's finishMessage (the reason of MALFORMED_FUNCTION_CALL).
type tap struct {
	opened        atomic.Bool // a 2xx response body was handed to the SDK
	finishMessage atomic.Pointer[string]
	// wait is the Retry-After of the answer that refused the request,
	// which genai's APIError does not keep.
	wait atomic.Int64
}

// refused keeps the Retry-After of resp when it refused the request.
func (t *tap) refused(resp *http.Response) {
	if t != nil && resp != nil && resp.StatusCode/100 != 2 {
		t.wait.Store(int64(llm.ParseRetryAfter(resp.Header, time.Now())))
	}
}

type tapKey struct{}

func withTap(ctx context.Context, t *tap) context.Context { return context.WithValue(ctx, tapKey{}, t) }

func (t *tap) message() string {
	if p := t.finishMessage.Load(); p != nil {
		return *p
	}
	return ""
}

type tapBody struct {
	rc   io.ReadCloser
	t    *tap
	line []byte
}

// finishMessageKey is the key without its opening quote: bytes.Index looks
// for a key's first byte before it compares the rest, and a quote is every
// few bytes of JSON (it then falls back to comparing at every position),
// where an f is rare. A match that is not the key costs one json.Unmarshal.
var finishMessageKey = []byte(`finishMessage"`)

func (b *tapBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	chunk := p[:n]
	for len(chunk) > 0 {
		i := bytes.IndexByte(chunk, '\n')
		if i < 0 {
			b.line = append(b.line, chunk...)
			break
		}
		b.check(chunk[:i])
		chunk = chunk[i+1:]
	}
	return n, err
}

// check looks at one complete line; the common case (no finishMessage in
// it) costs one search and no copy when the line arrived in one read.
func (b *tapBody) check(tail []byte) {
	line := tail
	if len(b.line) > 0 {
		b.line = append(b.line, tail...)
		line = b.line
	}
	if bytes.Contains(line, finishMessageKey) {
		data := bytes.TrimSpace(line)
		data = bytes.TrimPrefix(data, []byte("data:"))
		var chunk struct {
			Candidates []struct {
				FinishMessage string `json:"finishMessage"`
			} `json:"candidates"`
		}
		if json.Unmarshal(data, &chunk) == nil {
			for _, c := range chunk.Candidates {
				if c.FinishMessage != "" {
					m := c.FinishMessage
					b.t.finishMessage.Store(&m)
					break
				}
			}
		}
	}
	b.line = b.line[:0]
}

func (b *tapBody) Close() error { return b.rc.Close() }
