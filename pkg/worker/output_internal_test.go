package worker

import (
	"encoding/json"
	"testing"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/tool"
)

// Whatever a model answers, the check either names a violation or returns
// compact JSON that fits the schema; it never panics.
func FuzzCheckAnswer(f *testing.F) {
	for _, s := range []string{``, `{}`, `{"n":1}`, "```json\n{\"n\":2}\n```", "```", "``````", `[1]`, `{"n":"x"}`, `nul`, " \n{\"n\": 3}\t"} {
		f.Add(s)
	}
	schema := json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}`)
	v, err := tool.NewValidator(schema)
	if err != nil {
		f.Fatal(err)
	}
	withSchema := &events.ResponseFormat{Type: events.FormatJSONSchema, Schema: schema}
	anyJSON := &events.ResponseFormat{Type: events.FormatJSON}
	f.Fuzz(func(t *testing.T, text string) {
		for _, c := range []struct {
			f *events.ResponseFormat
			v *tool.Validator
		}{{withSchema, v}, {anyJSON, nil}} {
			out, problem := checkAnswer(c.f, c.v, text)
			if problem != "" {
				if out != nil {
					t.Fatalf("%q: output %s with problem %q", text, out, problem)
				}
				continue
			}
			if !json.Valid(out) || out[0] != '{' {
				t.Fatalf("%q: accepted %s", text, out)
			}
			if c.v != nil {
				if err := c.v.Validate(out); err != nil {
					t.Fatalf("%q: accepted %s, which does not fit: %v", text, out, err)
				}
			}
		}
	})
}

func TestUnfence(t *testing.T) {
	for in, want := range map[string]string{
		"```json\n{\"a\":1}\n```": `{"a":1}`,
		"```\n{}\n```":            `{}`,
		"  {}  ":                  `{}`,
		"```{}```":                "```{}```", // no line for the language: not a fence
		"```json\n{}":             "```json\n{}",
	} {
		if got := unfence(in); got != want {
			t.Errorf("unfence(%q) = %q, want %q", in, got, want)
		}
	}
}
