package a2a

import (
	"encoding/json"
	"errors"
	"testing"

	spec "github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/llmworker/llmworker/pkg/events"
)

var twoPending = []events.ToolCall{
	{ID: "call_1", Name: "get_capital", Input: json.RawMessage(`{"country":"France"}`)},
	{ID: "call_2", Name: "get_temperature", Input: json.RawMessage(`{"city":"Paris"}`)},
}

// A text answer decides every pending call alike; a data part decides
// each, with the turn's decision forms; anything else names what the
// task waits for.
func TestDecisionsOf(t *testing.T) {
	all := func(k events.DecisionKind) map[string]events.Decision {
		return map[string]events.Decision{"call_1": {Kind: k}, "call_2": {Kind: k}}
	}
	for _, c := range []struct {
		name  string
		parts spec.ContentParts
		want  map[string]events.Decision
	}{
		{"approve", spec.ContentParts{spec.NewTextPart(" Approve\n")}, all(events.DecisionApprove)},
		{"yes", spec.ContentParts{spec.NewTextPart("yes")}, all(events.DecisionApprove)},
		{"deny", spec.ContentParts{spec.NewTextPart("DENY")}, all(events.DecisionDeny)},
		{"each", spec.ContentParts{spec.NewDataPart(map[string]any{"decisions": map[string]any{
			"call_1": "approve", "call_2": map[string]any{"input": map[string]any{"city": "Lyon"}},
		}})}, map[string]events.Decision{
			"call_1": {Kind: events.DecisionApprove},
			"call_2": {Kind: events.DecisionEdit, Input: json.RawMessage(`{"city":"Lyon"}`)},
		}},
		{"deny with a reason", spec.ContentParts{spec.NewDataPart(map[string]any{"decisions": map[string]any{
			"call_1": map[string]any{"deny": "not now"}, "call_2": "deny",
		}})}, map[string]events.Decision{
			"call_1": {Kind: events.DecisionDeny, Reason: "not now"},
			"call_2": {Kind: events.DecisionDeny},
		}},
	} {
		got, err := decisionsOf(c.parts, twoPending)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		gb, _ := json.Marshal(got)
		wb, _ := json.Marshal(c.want)
		if string(gb) != string(wb) {
			t.Errorf("%s: %s, want %s", c.name, gb, wb)
		}
	}
	for _, c := range []struct {
		name  string
		parts spec.ContentParts
	}{
		{"maybe", spec.ContentParts{spec.NewTextPart("maybe")}},
		{"one call left out", spec.ContentParts{spec.NewDataPart(map[string]any{"decisions": map[string]any{"call_1": "approve"}})}},
		{"a call not pending", spec.ContentParts{spec.NewDataPart(map[string]any{"decisions": map[string]any{"call_1": "approve", "call_2": "deny", "call_9": "approve"}})}},
		{"a decision that is none", spec.ContentParts{spec.NewDataPart(map[string]any{"decisions": map[string]any{"call_1": "perhaps", "call_2": "deny"}})}},
	} {
		if _, err := decisionsOf(c.parts, twoPending); !errors.Is(err, spec.ErrInvalidParams) {
			t.Errorf("%s: %v, want invalid params", c.name, err)
		}
	}
}

// Message parts become the turn's parts: text, data as JSON text, bytes
// as inline media, an https URL as media by URL; other media types and
// URLs are refused.
func TestToParts(t *testing.T) {
	raw := spec.NewRawPart([]byte("%PDF-1.4"))
	raw.MediaType, raw.Filename = "application/pdf", "a.pdf"
	got, err := toParts(spec.ContentParts{
		spec.NewTextPart("look"),
		spec.NewDataPart(map[string]any{"n": 1}),
		raw,
		spec.NewFileURLPart("https://example.com/cat.png", "image/png"),
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []events.Part{
		{Type: events.PartText, Text: "look"},
		{Type: events.PartText, Text: `{"n":1}`},
		{Type: events.PartFile, MediaType: "application/pdf", Filename: "a.pdf", Data: "JVBERi0xLjQ="},
		{Type: events.PartImage, MediaType: "image/png", URL: "https://example.com/cat.png"},
	}
	gb, _ := json.Marshal(got)
	wb, _ := json.Marshal(want)
	if string(gb) != string(wb) {
		t.Errorf("parts:\n%s\nwant\n%s", gb, wb)
	}
	bad := spec.NewRawPart([]byte{1, 2})
	bad.MediaType = "application/x-thing"
	if _, err := toParts(spec.ContentParts{bad}); !errors.Is(err, spec.ErrUnsupportedContentType) {
		t.Errorf("an unknown media type: %v", err)
	}
	if _, err := toParts(spec.ContentParts{spec.NewFileURLPart("http://example.com/cat.png", "image/png")}); !errors.Is(err, spec.ErrInvalidParams) {
		t.Errorf("an http URL: %v", err)
	}
	if _, err := toParts(spec.ContentParts{spec.NewRawPart([]byte{1})}); !errors.Is(err, spec.ErrInvalidParams) {
		t.Errorf("bytes without a media type: %v", err)
	}
}
