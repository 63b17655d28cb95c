package models_test

import (
	"errors"
	"testing"

	"github.com/llmworker/llmworker/pkg/models"
)

// FuzzParse: any input is a table whose every entry keeps the rules, or
// an ErrInvalid; never a panic.
func FuzzParse(f *testing.F) {
	f.Add([]byte(`{"models":{"openai:a":{"context_window":2,"max_output_tokens":1}}}`), false)
	f.Add([]byte("models:\n  azure:a:\n    context_window: 10\n    max_output_tokens: 1\n"), true)
	f.Add([]byte(`{"models":{"openai:a":{"context_window":1,"max_output_tokens":1}}}`), false)
	f.Add([]byte("models: {x: 1}"), true)
	f.Fuzz(func(t *testing.T, data []byte, yamlForm bool) {
		tb, err := models.Parse(data, yamlForm)
		if err != nil {
			if !errors.Is(err, models.ErrInvalid) {
				t.Fatalf("error %v is not ErrInvalid", err)
			}
			return
		}
		if tb.Len() == 0 {
			t.Fatal("an empty table was accepted")
		}
	})
}
