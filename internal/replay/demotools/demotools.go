// Package demotools holds the tools of the replay scenarios (internal/replay):
// canned answers, real plumbing. It is apart from internal/replay so that
// toolexec can host them without linking the provider SDKs the replay
// server needs.
package demotools

import (
	"context"
	"encoding/json"
	"strings"
	"time"

	"github.com/llmworker/llmworker/pkg/tool"
)

// DemoNote marks every demo tool result: the data is canned, only the
// plumbing is real.
const DemoNote = "demo data, llmworker replay"

// CapitalArgs is the input of the demo get_capital.
type CapitalArgs struct {
	Country string `json:"country" description:"Country name, e.g. France"`
}

// TemperatureArgs is the input of the demo get_temperature.
type TemperatureArgs struct {
	City string `json:"city" description:"City name, e.g. Paris"`
}

// NoArgs is the input of demo tools without arguments.
type NoArgs struct{}

var capitals = map[string]string{
	"france": "Paris", "uk": "London", "united kingdom": "London", "germany": "Berlin",
	"japan": "Tokyo", "mexico": "Mexico City", "italy": "Rome", "spain": "Madrid",
	"united states": "Washington, D.C.", "usa": "Washington, D.C.", "canada": "Ottawa",
}

// temperatures are what the recorded tools answered (Paris: 30°C in the
// Gemini recording); other cities get a plausible value.
var temperatures = map[string]string{"paris": "30°C", "london": "18°C", "tokyo": "24°C"}

// Version is what the demo fixed_version answers: the value the recorded
// fixed_version tool returned, which the recorded answer quotes.
const Version = "0.32a0"

// demo marks a canned answer as such.
func demo(s string) string { return s + " (" + DemoNote + ")" }

// Tools returns the demo tools the scenarios call (get_capital,
// get_temperature, fixed_version). They run for real on toolexec, answer
// what the recorded tools answered (so the recorded answers fit) and say
// so in their description and result. They only read canned data, so
// they are read-only (tool.WithReadOnly): a call starts as soon as its
// input is complete, while the model still streams.
func Tools() []tool.Tool {
	capital := tool.Must("get_capital", "[demo] The capital city of a country (canned demo data for the replay).",
		func(_ context.Context, a CapitalArgs) (string, error) {
			c, ok := capitals[strings.ToLower(strings.TrimSpace(a.Country))]
			if !ok {
				return demo("unknown country " + a.Country), nil
			}
			return demo(c), nil
		}, tool.WithReadOnly())
	temperature := tool.Must("get_temperature", "[demo] The current temperature in a city (canned demo data for the replay).",
		func(_ context.Context, a TemperatureArgs) (string, error) {
			t, ok := temperatures[strings.ToLower(strings.TrimSpace(a.City))]
			if !ok {
				t = "21°C"
			}
			return demo(t), nil
		}, tool.WithReadOnly())
	version := tool.Must("fixed_version", "[demo] The fixed version of the service (canned demo data for the replay).",
		func(context.Context, NoArgs) (string, error) {
			return demo(Version), nil
		}, tool.WithReadOnly())
	return []tool.Tool{capital, temperature, version}
}

// Slow returns t taking d longer per call (d <= 0: t itself); a cancelled
// call stops waiting.
func Slow(t tool.Tool, d time.Duration) tool.Tool {
	if d <= 0 {
		return t
	}
	return slow{Tool: t, d: d}
}

type slow struct {
	tool.Tool
	d time.Duration
}

// Eager is t's: taking longer changes nothing about whether a call may
// start early.
func (s slow) Eager() bool { return tool.EagerOf(s.Tool) }

func (s slow) Execute(ctx context.Context, in json.RawMessage) (string, error) {
	select {
	case <-time.After(s.d):
	case <-ctx.Done():
		return "", context.Cause(ctx)
	}
	return s.Tool.Execute(ctx, in)
}
