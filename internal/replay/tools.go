package replay

import (
	"context"
	"strings"

	"github.com/llmworker/llmworker/pkg/tool"
)

// DemoNote marks every demo tool result: the data is canned, only the
// plumbing is real.
const DemoNote = "demo data, llmworker replay"

// WeatherArgs is the input of the demo get_weather.
type WeatherArgs struct {
	City string `json:"city" description:"City name, e.g. Mexico City"`
}

// Weather is the result of the demo get_weather.
type Weather struct {
	City        string  `json:"city"`
	TempC       float64 `json:"temperature_c"`
	Conditions  string  `json:"conditions"`
	Description string  `json:"note"`
}

// CapitalArgs is the input of the demo get_capital.
type CapitalArgs struct {
	Country string `json:"country" description:"Country name, e.g. France"`
}

// NoArgs is the input of demo tools without arguments.
type NoArgs struct{}

var capitals = map[string]string{
	"france": "Paris", "uk": "London", "united kingdom": "London", "germany": "Berlin",
	"japan": "Tokyo", "mexico": "Mexico City", "italy": "Rome", "spain": "Madrid",
	"united states": "Washington, D.C.", "usa": "Washington, D.C.", "canada": "Ottawa",
}

// Tools returns the demo tools the scenarios call (get_weather,
// get_product_name, get_capital, fixed_version). They run for real on
// toolexec, answer plausible canned data and say so in their description
// and result.
func Tools() []tool.Tool {
	weather := tool.Must("get_weather", "[demo] Current weather for a city (canned demo data for the replay).",
		func(_ context.Context, a WeatherArgs) (Weather, error) {
			w := Weather{City: a.City, TempC: 21.5, Conditions: "partly cloudy", Description: DemoNote}
			if strings.EqualFold(a.City, "Mexico City") {
				w.TempC, w.Conditions = 23, "sunny, light breeze"
			}
			return w, nil
		})
	product := tool.Must("get_product_name", "[demo] The name of our product (canned demo data for the replay).",
		func(context.Context, NoArgs) (string, error) {
			return "llmworker (" + DemoNote + ")", nil
		})
	capital := tool.Must("get_capital", "[demo] The capital city of a country (canned demo data for the replay).",
		func(_ context.Context, a CapitalArgs) (string, error) {
			c, ok := capitals[strings.ToLower(strings.TrimSpace(a.Country))]
			if !ok {
				return "unknown country " + a.Country + " (" + DemoNote + ")", nil
			}
			return c + " (" + DemoNote + ")", nil
		})
	version := tool.Must("fixed_version", "[demo] The fixed version of the service (canned demo data for the replay).",
		func(context.Context, NoArgs) (string, error) {
			return "1.0.0 (" + DemoNote + ")", nil
		})
	return []tool.Tool{weather, product, capital, version}
}
