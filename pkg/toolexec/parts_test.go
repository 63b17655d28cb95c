package toolexec_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/tool"
	"github.com/llmworker/llmworker/pkg/toolexec"
)

var pngData = []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00\x1f\x15\xc4\x89")

// A tool's image crosses NATS in the result: the caller gets the parts
// the tool returned.
func TestResultWithParts(t *testing.T) {
	e := start(t)
	want := tool.Content{events.TextPart("the screen:"), events.ImagePart("image/png", pngData)}
	replica(t, e.url, toolexec.Config{}, tool.Must("shot", "Takes a screenshot.", func(context.Context, struct{}) (tool.Content, error) {
		return want, nil
	}))
	text, parts, err := tool.ExecuteContent(call(ctx(t), "t1", "c1"), remote(t, e, "shot"), json.RawMessage(`{}`))
	if err != nil || text != "the screen:" || !reflect.DeepEqual(parts, want) {
		t.Fatalf("ExecuteContent = %q, %+v, %v; want the parts", text, parts, err)
	}
	// The stored result has the parts too (a turn continued elsewhere
	// reads it from there).
	res, ok, err := e.tc.StoredResult(ctx(t), "t1", "c1")
	if err != nil || !ok || !reflect.DeepEqual(tool.Content(res.Parts), want) {
		t.Fatalf("stored result %+v (%v, %v)", res, ok, err)
	}
}

// rawContent is a hand-written ContentTool: nothing checked its parts.
type rawContent struct {
	name  string
	parts tool.Content
}

func (r rawContent) Name() string                 { return r.name }
func (r rawContent) Description() string          { return "returns parts" }
func (r rawContent) InputSchema() json.RawMessage { return json.RawMessage(`{"type":"object"}`) }
func (r rawContent) Execute(context.Context, json.RawMessage) (string, error) {
	return events.PartsText(r.parts), nil
}
func (r rawContent) ExecuteContent(context.Context, json.RawMessage) (string, tool.Content, error) {
	return events.PartsText(r.parts), r.parts, nil
}

// A result that cannot be carried is an error result naming the tool,
// not a call that is never answered: inline media (each part below
// events.InlineMediaLimit, so none is stored apart) larger together than a
// NATS message, and parts that are not valid.
func TestResultPartsRefused(t *testing.T) {
	e := start(t)
	limit := int(e.nc.MaxPayload())
	small := append(append([]byte{}, pngData...), bytes.Repeat([]byte{0}, events.InlineMediaLimit-len(pngData))...)
	var huge tool.Content
	for range limit/events.InlineMediaLimit + 1 { // their base64 together is over the max payload
		huge = append(huge, events.ImagePart("image/png", small))
	}
	replica(t, e.url, toolexec.Config{},
		rawContent{"huge", huge},
		rawContent{"mislabelled", tool.Content{events.ImagePart("image/jpeg", pngData)}})
	for name, want := range map[string][]string{
		"huge":        {`"huge"`, "max payload"},
		"mislabelled": {`"mislabelled"`, "invalid result", "image/png"},
	} {
		t.Run(name, func(t *testing.T) {
			_, _, err := tool.ExecuteContent(call(ctx(t), "t1", "c-"+name), remote(t, e, name), json.RawMessage(`{}`))
			if !errors.Is(err, toolexec.ErrToolFailed) {
				t.Fatalf("err = %v, want an error result", err)
			}
			for _, w := range want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%q does not say %q", err, w)
				}
			}
		})
	}
}
