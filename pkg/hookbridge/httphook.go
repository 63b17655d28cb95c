package hookbridge

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/hook/hooknats"
	"github.com/llmworker/llmworker/pkg/telemetry"
)

// maxHTTPBody bounds the reply body of an HTTP hook.
const maxHTTPBody = 4 << 20

// HTTPOptions configure an HTTP hook.
type HTTPOptions struct {
	// URL receives the POST (http or https).
	URL string
	// Header is sent with every request (e.g. Authorization).
	Header http.Header
	// Client sends the requests (nil = a client without a timeout of its
	// own: the ctx deadline bounds each call).
	Client *http.Client
}

// HTTP returns a handler that POSTs each request as JSON
// (events.HookRequest, Content-Type application/json) to o.URL and reads
// the reply: a 2xx status with a JSON hook response answers; any other
// status, a body that is not a JSON hook response (an empty body, null, an
// object without "result": hooknats.DecodeBody, as over NATS), a transport
// error and a timeout (the ctx deadline: the hook's timeout_ms, else
// DefaultCommandTimeout) are hook failures (ErrHTTP), which the turn
// handles under the hook's failure policy.
func HTTP(o HTTPOptions) (hooknats.Handler, error) {
	u, err := url.Parse(o.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%w: http hook url must be an http(s) URL, got %q", hooknats.ErrInvalidHook, o.URL)
	}
	client := o.Client
	if client == nil {
		client = http.DefaultClient
	}
	return hooknats.HandlerFunc(func(ctx context.Context, req *events.HookRequest) (*events.HookResponse, error) {
		if _, ok := ctx.Deadline(); !ok {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, DefaultCommandTimeout)
			defer cancel()
		}
		body, err := json.Marshal(req)
		if err != nil {
			return nil, err
		}
		hr, err := http.NewRequestWithContext(ctx, http.MethodPost, o.URL, bytes.NewReader(body))
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrHTTP, err)
		}
		for k, vs := range o.Header {
			for _, v := range vs {
				hr.Header.Add(k, v)
			}
		}
		hr.Header.Set("Content-Type", events.ContentTypeJSON)
		hr.Header.Set("Accept", events.ContentTypeJSON)
		telemetry.InjectHTTP(ctx, hr.Header)
		res, err := client.Do(hr)
		if err != nil {
			return nil, fmt.Errorf("%w: POST %s: %w", ErrHTTP, u.Redacted(), err)
		}
		defer res.Body.Close()
		b, err := io.ReadAll(io.LimitReader(res.Body, maxHTTPBody+1))
		if err != nil {
			return nil, fmt.Errorf("%w: POST %s: reading the reply: %w", ErrHTTP, u.Redacted(), err)
		}
		if res.StatusCode < 200 || res.StatusCode > 299 {
			return nil, fmt.Errorf("%w: POST %s: status %s%s", ErrHTTP, u.Redacted(), res.Status, colon(snippet(b)))
		}
		if len(b) > maxHTTPBody {
			return nil, fmt.Errorf("%w: POST %s: reply larger than %d bytes", ErrHTTP, u.Redacted(), maxHTTPBody)
		}
		resp, err := hooknats.DecodeBody(b, req.Event)
		if err != nil {
			return nil, fmt.Errorf("%w: POST %s: the reply is not a JSON hook response: %w", ErrHTTP, u.Redacted(), err)
		}
		return resp, nil
	}), nil
}

func snippet(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}

// http parses an http: block. Header values may use ${VAR} for the
// environment (secrets stay out of the file).
func (d *decoder) http(n *yaml.Node, path string, reg *events.HookRegistration) (hooknats.Handler, error) {
	m, err := d.mapping(n, path, "url", "headers")
	if err != nil {
		return nil, err
	}
	un, ok := m["url"]
	if !ok {
		return nil, d.errAt(n, path+".url", "is required")
	}
	var o HTTPOptions
	if o.URL, err = d.str(un, path+".url"); err != nil {
		return nil, err
	}
	o.URL = os.Expand(o.URL, d.opts.Getenv)
	if v, ok := m["headers"]; ok {
		hs, nodes, err := d.stringMap(v, path+".headers")
		if err != nil {
			return nil, err
		}
		o.Header = http.Header{}
		for _, kv := range nodes {
			k := kv[0].Value
			o.Header.Add(k, os.Expand(hs[k], d.opts.Getenv))
		}
	}
	h, err := HTTP(o)
	if err != nil {
		return nil, d.errAt(un, path+".url", "must be an http:// or https:// URL, got %q", o.URL)
	}
	return h, nil
}
