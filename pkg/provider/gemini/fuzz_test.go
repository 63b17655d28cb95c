package gemini_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"reflect"
	"testing"

	"github.com/llmworker/llmworker/pkg/provider/gemini"
	"github.com/llmworker/llmworker/pkg/provider/providertest"
)

// FuzzStream feeds mutated recorded streams through the SDK and the
// adapter: never a panic, always a well-formed stream.
func FuzzStream(f *testing.F) {
	for _, path := range providertest.Fixtures(f, "gemini") {
		b, err := providertest.LoadFixture(path)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
		f.Add(b[:len(b)/2]) // cut mid-stream
	}
	f.Add([]byte("data: {\"candidates\":[{\"content\":{\"parts\":[{\"functionCall\":{\"partialArgs\":[{\"jsonPath\":\"$.a[2].b\",\"stringValue\":\"x\",\"willContinue\":true}],\"willContinue\":true}}]}}]}\r\n\r\n"))
	f.Add([]byte("data: {\"candidates\":[{\"content\":{\"parts\":[{\"functionCall\":{\"name\":\"f\",\"willContinue\":true}},{\"functionCall\":{\"partialArgs\":[{\"jsonPath\":\"$['k']\",\"numberValue\":1}]}}]},\"finishReason\":\"STOP\"}]}\r\n\r\n"))
	f.Fuzz(func(t *testing.T, body []byte) {
		p, err := gemini.New(gemini.Config{APIKey: "k", BaseURL: "http://replay.invalid",
			HTTPClient: providertest.FixedClient(body), MaxRetries: -1})
		if err != nil {
			t.Fatal(err)
		}
		providertest.CheckFuzzInput(t, p, simpleRequest(), body)
	})
}

// captureTransport answers every request with a recorded stream and keeps
// the last request body.
type captureTransport struct {
	providertest.FixedTransport
	body []byte
}

func (c *captureTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.body, _ = io.ReadAll(r.Body)
	_ = r.Body.Close()
	r.Body = io.NopCloser(bytes.NewReader(nil))
	return c.FixedTransport.RoundTrip(r)
}

// FuzzProviderOptions applies arbitrary provider_options objects: the
// request is refused or its body is JSON whose top-level scalar options
// are the ones given and whose null options are gone.
func FuzzProviderOptions(f *testing.F) {
	f.Add([]byte(`{"generationConfig":{"candidateCount":1,"temperature":null},"safetySettings":[]}`))
	f.Add([]byte(`{"contents":null,"x.y":{"*":1},"toolConfig":7}`))
	body := providertest.MustLoadFixture(f, textFixture)
	f.Fuzz(func(t *testing.T, opts []byte) {
		var m map[string]json.RawMessage
		if json.Unmarshal(opts, &m) != nil || m == nil {
			return
		}
		ct := &captureTransport{FixedTransport: providertest.FixedTransport{Body: body}}
		p, err := gemini.New(gemini.Config{APIKey: "k", BaseURL: "http://replay.invalid",
			HTTPClient: &http.Client{Transport: ct}, MaxRetries: -1})
		if err != nil {
			t.Fatal(err)
		}
		req := simpleRequest()
		req.ProviderOptions = map[string]json.RawMessage{"gemini": opts}
		s, err := p.Stream(context.Background(), req)
		if err != nil {
			return
		}
		_ = s.Close()
		var sent map[string]json.RawMessage
		if err := json.Unmarshal(ct.body, &sent); err != nil {
			t.Fatalf("body is not a JSON object: %v\n%s", err, ct.body)
		}
		for k, v := range m {
			v = bytes.TrimSpace(v)
			if string(v) == "null" {
				if _, ok := sent[k]; ok {
					t.Fatalf("option %q is null, body has %s", k, sent[k])
				}
				continue
			}
			if len(v) == 0 || v[0] == '{' {
				continue
			}
			var want, got any
			_ = json.Unmarshal(v, &want)
			_ = json.Unmarshal(sent[k], &got)
			if !reflect.DeepEqual(want, got) {
				t.Fatalf("option %q = %s, body has %s", k, v, sent[k])
			}
		}
	})
}
