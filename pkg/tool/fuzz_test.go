package tool

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
)

// FuzzExecute feeds arbitrary bytes to a typed tool as model input. Execute
// must never panic, must answer every input with either a result or an
// invalid-argument error (the function never fails), and must call the
// function only with input the schema accepts.
func FuzzExecute(f *testing.F) {
	for _, c := range forecastInvalid {
		f.Add([]byte(c.input))
	}
	for _, s := range []string{
		``, `{}`, `null`, `[]`, `"x"`, `1`, `{"location":{"city":"x"},"score":1,"force":true}`,
		`{"location":{"city":"x"},"score":1e999,"force":true}`,
		`{"location":{"city":"x"},"score":1,"force":true,"days":-0}`,
		`{"location":{"city":"\ud800"},"score":1,"force":true}`,
		`{"location":{"city":"x"},"score":1,"force":true,"labels":{"":""},"stops":[]}`,
		"{\"location\":{\"city\":\"\xff\"},\"score\":1,\"force\":true}",
		`{"location":{"city":"x"},"location":{},"score":1,"force":true}`,
		`[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[`,
	} {
		f.Add([]byte(s))
	}
	tl := Must("forecast", "", func(ctx context.Context, a ForecastArgs) (ForecastArgs, error) { return a, nil })
	f.Fuzz(func(t *testing.T, input []byte) {
		out, err := tl.Execute(context.Background(), json.RawMessage(input))
		if err != nil {
			var ia *InvalidArgumentError
			if !errors.As(err, &ia) || len(ia.Problems) == 0 || ia.Tool != "forecast" {
				t.Fatalf("input %q: err = %#v, want an *InvalidArgumentError with problems", input, err)
			}
			if ia.Error() == "" {
				t.Fatal("empty message")
			}
			return
		}
		if !json.Valid([]byte(out)) {
			t.Fatalf("input %q: result %q is not JSON", input, out)
		}
		if verr := tl.ValidateInput(json.RawMessage(input)); verr != nil {
			t.Fatalf("input %q ran although ValidateInput says %v", input, verr)
		}
	})
}
