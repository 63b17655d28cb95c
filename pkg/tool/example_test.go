package tool_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/llmworker/llmworker/pkg/tool"
)

// WeatherArgs are the arguments of the get_weather tool. Struct tags become
// the input schema the model sees.
type WeatherArgs struct {
	City string `json:"city" description:"City name, e.g. Tokyo"`
	Unit string `json:"unit,omitempty" jsonschema:"enum=celsius,enum=fahrenheit,description=Temperature unit"`
}

// Weather is what the tool returns; the model reads it as JSON.
type Weather struct {
	City        string  `json:"city"`
	Temperature float64 `json:"temperature"`
	Unit        string  `json:"unit"`
}

func getWeather(ctx context.Context, a WeatherArgs) (Weather, error) {
	if a.Unit == "" {
		a.Unit = "celsius"
	}
	t := 21.5
	if a.Unit == "fahrenheit" {
		t = 70.7
	}
	return Weather{City: a.City, Temperature: t, Unit: a.Unit}, nil
}

// A typed tool: the schema comes from WeatherArgs, the input is validated and
// decoded before getWeather runs, and its result is returned as JSON.
func ExampleNew() {
	weather, err := tool.New("get_weather", "Current weather for a city.", getWeather)
	if err != nil {
		panic(err)
	}
	// Print the schema with sorted keys.
	var schema map[string]any
	_ = json.Unmarshal(weather.InputSchema(), &schema)
	pretty, _ := json.MarshalIndent(schema, "", "  ")
	fmt.Println(string(pretty))

	ctx := context.Background()
	out, err := weather.Execute(ctx, json.RawMessage(`{"city":"Tokyo"}`))
	fmt.Println(out, err)

	// Wrong input comes back as an error the model can act on.
	_, err = weather.Execute(ctx, json.RawMessage(`{"town":"Tokyo","unit":"kelvin"}`))
	fmt.Println(errors.Is(err, tool.ErrInvalidArgument))
	fmt.Println(err)
	// Output:
	// {
	//   "additionalProperties": false,
	//   "properties": {
	//     "city": {
	//       "description": "City name, e.g. Tokyo",
	//       "type": "string"
	//     },
	//     "unit": {
	//       "description": "Temperature unit",
	//       "enum": [
	//         "celsius",
	//         "fahrenheit"
	//       ],
	//       "type": "string"
	//     }
	//   },
	//   "required": [
	//     "city"
	//   ],
	//   "type": "object"
	// }
	// {"city":"Tokyo","temperature":21.5,"unit":"celsius"} <nil>
	// true
	// invalid arguments for tool "get_weather": field "city" is required; field "town" is not allowed (allowed: city, unit); field "unit" must be one of "celsius", "fahrenheit"
}

// A registry holds the tools of a worker or executor; a turn's tool list
// selects definitions from it.
func ExampleRegistry() {
	var reg tool.Registry
	reg.MustRegister(
		tool.Must("get_weather", "Current weather for a city.", getWeather),
		tool.MustFunc("echo", "Repeat the input.", nil, func(ctx context.Context, input json.RawMessage) (string, error) {
			return string(input), nil
		}),
	)
	fmt.Println(reg.Names())

	err := reg.Register(tool.Must("echo", "", getWeather))
	fmt.Println(err)

	defs, err := reg.Definitions("*")
	for _, d := range defs {
		fmt.Println(d.Name, "-", d.Description)
	}
	_, err = reg.Definitions("get_weather", "web_search")
	fmt.Println(err, errors.Is(err, tool.ErrUnknownTool))

	t, ok := reg.Get("echo")
	out, _ := t.Execute(context.Background(), json.RawMessage(`{"say":"hi"}`))
	fmt.Println(ok, out)
	// Output:
	// [echo get_weather]
	// tool: duplicate tool name: "echo" is already registered
	// echo - Repeat the input.
	// get_weather - Current weather for a city.
	// unknown tool "web_search" true
	// true {"say":"hi"}
}

// A raw tool takes the input as JSON, checked against the schema it gives.
func ExampleNewFunc() {
	add := tool.MustFunc("add", "Add two integers.",
		json.RawMessage(`{"type":"object","required":["a","b"],"properties":{"a":{"type":"integer"},"b":{"type":"integer"}}}`),
		func(ctx context.Context, input json.RawMessage) (string, error) {
			var in struct{ A, B int }
			if err := json.Unmarshal(input, &in); err != nil {
				return "", err
			}
			return fmt.Sprint(in.A + in.B), nil
		})
	out, err := add.Execute(context.Background(), json.RawMessage(`{"a":2,"b":3}`))
	fmt.Printf("%q %v\n", out, err)
	out, err = add.Execute(context.Background(), json.RawMessage(`{"a":2,"b":"3"}`))
	fmt.Printf("%q %v\n", out, err)
	// Output:
	// "5" <nil>
	// "" invalid arguments for tool "add": field "b" must be integer, got string
}

// An executor that only has a tool's catalog entry validates calls against
// its schema before running them elsewhere.
func ExampleNewValidator() {
	v, err := tool.NewValidator(json.RawMessage(`{"type":"object","required":["query"],
		"properties":{"query":{"type":"string","minLength":3},"limit":{"type":"integer","maximum":50}}}`))
	if err != nil {
		panic(err)
	}
	fmt.Println(v.Validate(json.RawMessage(`{"query":"go generics"}`)))
	fmt.Println(v.Validate(json.RawMessage(`{"query":"go","limit":500}`)))
	// Output:
	// <nil>
	// invalid arguments: field "limit" must be <= 50, got 500; field "query" must be at least 3 characters long, got 2
}

// Failures of the function are execution errors; panics are caught.
func ExampleExecutionError() {
	flaky := tool.Must("flaky", "", func(ctx context.Context, _ struct{}) (string, error) {
		return "", errors.New("upstream timed out")
	})
	_, err := flaky.Execute(context.Background(), nil)
	fmt.Println(err, errors.Is(err, tool.ErrExecutionFailed))

	crash := tool.Must("crash", "", func(ctx context.Context, _ struct{}) (string, error) {
		panic("bug")
	})
	_, err = crash.Execute(context.Background(), nil)
	fmt.Println(err, errors.Is(err, tool.ErrPanicked))
	// Output:
	// tool "flaky" failed: upstream timed out true
	// tool "crash" failed: tool: panicked: bug true
}
