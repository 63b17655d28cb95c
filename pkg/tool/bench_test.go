package tool

import (
	"context"
	"encoding/json"
	"testing"
)

var benchInput = json.RawMessage(`{"location":{"city":"Tokyo","country":"JP"},"days":3,"unit":"celsius","tags":["a","b"],"score":0.5,"force":true}`)

// BenchmarkExecute is the per-call cost a typed tool adds around its
// function: validation, decoding, result encoding.
func BenchmarkExecute(b *testing.B) {
	tl := Must("forecast", "", func(ctx context.Context, a ForecastArgs) (int, error) { return a.Days, nil })
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := tl.Execute(ctx, benchInput); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkExecuteInvalid is the cost of rejecting bad input with a message.
func BenchmarkExecuteInvalid(b *testing.B) {
	tl := Must("forecast", "", func(ctx context.Context, a ForecastArgs) (int, error) { return a.Days, nil })
	ctx := context.Background()
	in := json.RawMessage(`{"location":{"city":1},"days":"3","unit":"kelvin"}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := tl.Execute(ctx, in); err == nil {
			b.Fatal("no error")
		}
	}
}

// BenchmarkNew is the one-off cost of building a typed tool (schema
// generation and compilation).
func BenchmarkNew(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := New("forecast", "", echoArgs); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRegistryDefinitions(b *testing.B) {
	var r Registry
	for _, n := range []string{"a", "b", "c", "d", "e", "f", "g", "h"} {
		r.MustRegister(noop(n))
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := r.Definitions("*"); err != nil {
			b.Fatal(err)
		}
	}
}
