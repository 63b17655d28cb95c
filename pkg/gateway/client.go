package gateway

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// Client is a Go client of a gateway's HTTP API, the counterpart of the
// AI SDK's DefaultChatTransport: it sends chat requests, resumes and
// stops, and reads the UI message streams. The zero value is not ready:
// set URL.
type Client struct {
	// URL is the gateway's base URL, e.g. http://127.0.0.1:8080.
	URL string
	// Token is sent as Authorization: Bearer <token> when set.
	Token string
	// HTTP is the client used (nil = http.DefaultClient).
	HTTP *http.Client
}

// StreamReader reads the parts of one UI message stream.
type StreamReader struct {
	body io.ReadCloser
	sc   *bufio.Scanner
	done bool
}

// NewStreamReader reads the server-sent events of r.
func NewStreamReader(r io.ReadCloser) *StreamReader {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	return &StreamReader{body: r, sc: sc}
}

// Next returns the next part as JSON and its type; ErrStreamEnded after
// "[DONE]", io.ErrUnexpectedEOF when the stream ends without it. Comment
// lines (keep-alives) and other SSE fields are skipped.
func (s *StreamReader) Next() (typ string, part json.RawMessage, err error) {
	if s.done {
		return "", nil, ErrStreamEnded
	}
	var data []byte
	for s.sc.Scan() {
		line := s.sc.Bytes()
		if len(line) == 0 {
			if data == nil {
				continue
			}
			if string(data) == "[DONE]" {
				s.done = true
				return "", nil, ErrStreamEnded
			}
			var head struct {
				Type string `json:"type"`
			}
			if err := json.Unmarshal(data, &head); err != nil || head.Type == "" {
				return "", nil, fmt.Errorf("gateway: stream part is no {\"type\": ...} object: %.200q", data)
			}
			return head.Type, json.RawMessage(data), nil
		}
		if v, ok := bytes.CutPrefix(line, []byte("data:")); ok {
			v = bytes.TrimPrefix(v, []byte(" "))
			if data != nil {
				data = append(data, '\n')
			}
			data = append(data, v...)
		}
	}
	if err := s.sc.Err(); err != nil {
		return "", nil, err
	}
	return "", nil, io.ErrUnexpectedEOF
}

// Close closes the stream; the turn goes on.
func (s *StreamReader) Close() error { return s.body.Close() }

// Chat posts a chat request and returns its stream.
func (c *Client) Chat(ctx context.Context, req *ChatRequest) (*StreamReader, error) {
	b, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	resp, err := c.do(ctx, http.MethodPost, "/api/chat", b)
	if err != nil {
		return nil, err
	}
	return NewStreamReader(resp.Body), nil
}

// Resume reattaches to the session's running or paused turn (GET
// /api/chat/{id}/stream); ErrNoActiveStream when there is none.
func (c *Client) Resume(ctx context.Context, chatID string) (*StreamReader, error) {
	resp, err := c.do(ctx, http.MethodGet, "/api/chat/"+url.PathEscape(chatID)+"/stream", nil)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode == http.StatusNoContent {
		resp.Body.Close()
		return nil, ErrNoActiveStream
	}
	return NewStreamReader(resp.Body), nil
}

// Messages reads the session's conversation (GET
// /api/chat/{id}/messages): what a client shows of a chat it opens.
func (c *Client) Messages(ctx context.Context, chatID string) ([]ChatMessage, error) {
	resp, err := c.do(ctx, http.MethodGet, "/api/chat/"+url.PathEscape(chatID)+"/messages", nil)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var m Messages
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
		return nil, fmt.Errorf("gateway: messages of %s: %w", chatID, err)
	}
	return m.Messages, nil
}

// Stop cancels the session's running or paused turn.
func (c *Client) Stop(ctx context.Context, chatID string) error {
	resp, err := c.do(ctx, http.MethodPost, "/api/chat/"+url.PathEscape(chatID)+"/stop", nil)
	if err != nil {
		return err
	}
	return resp.Body.Close()
}

// HTTPError is an error answer of the gateway.
type HTTPError struct {
	Status  int
	Code    string
	Message string
}

func (e *HTTPError) Error() string {
	return fmt.Sprintf("gateway: HTTP %d %s: %s", e.Status, e.Code, e.Message)
}

func (c *Client) do(ctx context.Context, method, path string, body []byte) (*http.Response, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimSuffix(c.URL, "/")+path, rd)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode >= 300 {
		defer resp.Body.Close()
		var eb errorBody
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		if json.Unmarshal(b, &eb) != nil {
			eb.Error.Message = string(b)
		}
		return nil, &HTTPError{Status: resp.StatusCode, Code: eb.Error.Code, Message: eb.Error.Message}
	}
	return resp, nil
}

// HTTPGet reads a JSON endpoint of the gateway (e.g. /api/sessions) and
// returns its body.
func (c *Client) HTTPGet(ctx context.Context, path string) (string, error) {
	resp, err := c.do(ctx, http.MethodGet, path, nil)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}
