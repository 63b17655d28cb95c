package worker_test

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/hook"
	"github.com/llmworker/llmworker/pkg/llm"
	"github.com/llmworker/llmworker/pkg/llm/llmtest"
	"github.com/llmworker/llmworker/pkg/tool"
	"github.com/llmworker/llmworker/pkg/worker"
)

func ptr[T any](v T) *T { return &v }

func weatherCall() llmtest.ToolCallSpec {
	return llmtest.ToolCallSpec{ID: "call_1", Name: "get_weather", Input: `{"city":"Oslo"}`}
}

// Every model call of the turn carries the options as they were set.
func TestOptionsGoIntoEveryModelCall(t *testing.T) {
	model := llmtest.NewScripted(llmtest.ToolStep(weatherCall()), llmtest.TextStep("Sunny."))
	opts := events.ModelOptions{
		Stop: []string{"END"}, TopP: ptr(0.5), TopK: ptr(40), Seed: ptr(int64(7)),
		ParallelToolCalls: ptr(false), ReasoningEffort: events.EffortLow,
		ProviderOptions: map[string]json.RawMessage{"openai": json.RawMessage(`{"service_tier":"flex"}`)},
		CacheKey:        "sess-1", ToolChoice: &events.ToolChoice{Mode: events.ToolNone},
	}
	w := mustNew(t, worker.Config{Provider: model, Model: "openai:m", Tools: []tool.Tool{weatherTool(t, nil)}, Options: opts})
	res := mustRun(t, w, events.UserText("Weather in Oslo?"))
	if res.Status != worker.StatusCompleted {
		t.Fatalf("status %s: %s", res.Status, res.Reason)
	}
	reqs := model.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d model calls, want 2", len(reqs))
	}
	for i, req := range reqs {
		if !reflect.DeepEqual(req.ModelOptions, opts) {
			t.Errorf("call %d options = %+v, want %+v", i+1, req.ModelOptions, opts)
		}
	}
}

// A forced tool is forced on the first model call only: the second call
// is auto, the model answers and the turn completes.
func TestForcedToolChoiceAppliesToFirstCallOnly(t *testing.T) {
	for _, choice := range []*events.ToolChoice{events.ForceTool("get_weather"), {Mode: events.ToolRequired}} {
		t.Run(string(choice.Mode), func(t *testing.T) {
			model := llmtest.NewScripted(llmtest.ToolStep(weatherCall()), llmtest.TextStep("Sunny in Oslo."))
			w := mustNew(t, worker.Config{Provider: model, Tools: []tool.Tool{weatherTool(t, nil)},
				Options: events.ModelOptions{ToolChoice: choice}})
			res := mustRun(t, w, events.UserText("Weather in Oslo?"))
			if res.Status != worker.StatusCompleted || res.Steps != 2 {
				t.Fatalf("status %s after %d steps (%s), want completed after 2", res.Status, res.Steps, res.Reason)
			}
			reqs := model.Requests()
			if got := reqs[0].ToolChoice; !reflect.DeepEqual(got, choice) {
				t.Errorf("first call tool_choice = %+v, want %+v", got, choice)
			}
			if got := reqs[1].ToolChoice; got != nil {
				t.Errorf("second call tool_choice = %+v, want unset (auto)", got)
			}
		})
	}
}

func TestToolChoiceEveryStep(t *testing.T) {
	model := llmtest.NewScripted(llmtest.ToolStep(weatherCall()), llmtest.TextStep("Sunny."))
	w := mustNew(t, worker.Config{Provider: model, Tools: []tool.Tool{weatherTool(t, nil)},
		Options: events.ModelOptions{ToolChoice: &events.ToolChoice{Mode: events.ToolRequired}}, ToolChoiceEveryStep: true})
	mustRun(t, w, events.UserText("Weather?"))
	for i, req := range model.Requests() {
		if req.ToolChoice == nil || req.ToolChoice.Mode != events.ToolRequired {
			t.Errorf("call %d tool_choice = %+v, want required", i+1, req.ToolChoice)
		}
	}
}

func TestToolChoiceNamingAToolNotOffered(t *testing.T) {
	for name, tools := range map[string][]tool.Tool{"other tool": {weatherTool(t, nil)}, "no tools": nil} {
		t.Run(name, func(t *testing.T) {
			_, err := worker.New(worker.Config{Provider: llmtest.NewScripted(), Tools: tools,
				Options: events.ModelOptions{ToolChoice: events.ForceTool("send_mail")}})
			var fe *events.FieldError
			if !errors.Is(err, worker.ErrInvalidConfig) || !errors.As(err, &fe) || fe.Field != "tool_choice.name" {
				t.Fatalf("New = %v, want ErrInvalidConfig with a field error on tool_choice.name", err)
			}
			if !strings.Contains(err.Error(), `"send_mail"`) {
				t.Errorf("error %q does not name the tool", err)
			}
		})
	}
}

func TestToolChoiceRequiredWithoutTools(t *testing.T) {
	_, err := worker.New(worker.Config{Provider: llmtest.NewScripted(), Options: events.ModelOptions{ToolChoice: &events.ToolChoice{Mode: events.ToolRequired}}})
	var fe *events.FieldError
	if !errors.Is(err, worker.ErrInvalidConfig) || !errors.As(err, &fe) || fe.Field != "tool_choice" {
		t.Fatalf("New = %v, want ErrInvalidConfig naming tool_choice", err)
	}
}

func TestInvalidOptionsAreRefused(t *testing.T) {
	for name, o := range map[string]events.ModelOptions{
		"response_format.schema": {ResponseFormat: &events.ResponseFormat{Type: events.FormatJSONSchema, Schema: json.RawMessage(`{"type":"nonsense"}`)}},
		"top_p":                  {TopP: ptr(2.0)},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := worker.New(worker.Config{Provider: llmtest.NewScripted(), Options: o})
			var fe *events.FieldError
			if !errors.Is(err, worker.ErrInvalidConfig) || !errors.As(err, &fe) || fe.Field != name {
				t.Fatalf("New = %v, want ErrInvalidConfig naming %s", err, name)
			}
		})
	}
}

// warner is a provider whose streams say which settings were not sent.
type warner struct {
	llm.Provider
	warnings []events.Warning
}

func (p warner) Stream(ctx context.Context, req *llm.Request) (llm.Stream, error) {
	s, err := p.Provider.Stream(ctx, req)
	if err != nil {
		return nil, err
	}
	return warnStream{s, p.warnings}, nil
}

type warnStream struct {
	llm.Stream
	w []events.Warning
}

func (s warnStream) Warnings() []events.Warning { return s.w }

func TestWarningsOfAModelCallAreATurnWarning(t *testing.T) {
	ws := []events.Warning{{Setting: "top_k", Message: "openai has no top_k; not sent"}}
	model := llmtest.NewScripted(llmtest.ToolStep(weatherCall()), llmtest.TextStep("Sunny."))
	rec := &recorder{}
	w := mustNew(t, worker.Config{Provider: warner{model, ws}, Model: "openai:m", Tools: []tool.Tool{weatherTool(t, nil)},
		Options: events.ModelOptions{TopK: ptr(3)}, Observer: rec})
	mustRun(t, w, events.UserText("Weather?"))
	got := rec.ofType(events.TypeTurnWarning)
	want := []any{
		events.TurnWarning{Step: 1, Model: "openai:m", Warnings: ws},
		events.TurnWarning{Step: 2, Model: "openai:m", Warnings: ws},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("warnings = %+v, want %+v", got, want)
	}
	// The warning of a step comes after its llmw.turn.step, on the turn
	// channel.
	types := rec.types()
	if types[1] != "turn.step" || types[2] != "turn.warning" {
		t.Errorf("events %v: want turn.step then turn.warning", types[:3])
	}
	for _, ev := range rec.events() {
		if ev.Type() == events.TypeTurnWarning && ev.Channel() != events.ChannelTurn {
			t.Errorf("warning on channel %s, want turn", ev.Channel())
		}
	}
}

func TestNoWarningEventWithoutWarnings(t *testing.T) {
	rec := &recorder{}
	w := mustNew(t, worker.Config{Provider: warner{llmtest.NewScripted(llmtest.TextStep("hi")), nil}, Observer: rec})
	mustRun(t, w, events.UserText("hi"))
	if got := rec.ofType(events.TypeTurnWarning); len(got) != 0 {
		t.Fatalf("warnings %v for a call without any", got)
	}
}

const weatherSchema = `{"type":"object","properties":{"city":{"type":"string"},"temp_c":{"type":"number"}},"required":["city","temp_c"],"additionalProperties":false}`

func jsonFormat() *events.ResponseFormat {
	return &events.ResponseFormat{Type: events.FormatJSONSchema, Name: "weather", Schema: json.RawMessage(weatherSchema)}
}

func TestStructuredOutputValidAtOnce(t *testing.T) {
	model := llmtest.NewScripted(llmtest.TextStep(`{"city":"Oslo",`, ` "temp_c": 21.5}`))
	rec := &recorder{}
	w := mustNew(t, worker.Config{Provider: model, Options: events.ModelOptions{ResponseFormat: jsonFormat()}, Observer: rec})
	res := mustRun(t, w, events.UserText("Weather in Oslo as JSON"))
	if res.Status != worker.StatusCompleted || res.Steps != 1 {
		t.Fatalf("status %s after %d steps: %s", res.Status, res.Steps, res.Reason)
	}
	if string(res.Output) != `{"city":"Oslo","temp_c":21.5}` {
		t.Errorf("Output = %s", res.Output)
	}
	if !reflect.DeepEqual(model.Requests()[0].ResponseFormat, jsonFormat()) {
		t.Errorf("request response_format = %+v", model.Requests()[0].ResponseFormat)
	}
	done := rec.ofType(events.TypeTurnCompleted)
	if len(done) != 1 || string(done[0].(events.TurnCompleted).Output) != `{"city":"Oslo","temp_c":21.5}` {
		t.Errorf("llmw.turn.completed = %+v, want the output", done)
	}
}

func TestStructuredOutputRepaired(t *testing.T) {
	model := llmtest.NewScripted(
		llmtest.TextStep(`{"city":"Oslo"}`),
		llmtest.TextStep("```json\n{\"city\":\"Oslo\",\"temp_c\":20}\n```"),
	)
	w := mustNew(t, worker.Config{Provider: model, Options: events.ModelOptions{ResponseFormat: jsonFormat()}})
	res := mustRun(t, w, events.UserText("Weather in Oslo as JSON"))
	if res.Status != worker.StatusCompleted || res.Steps != 2 {
		t.Fatalf("status %s after %d steps: %s", res.Status, res.Steps, res.Reason)
	}
	if string(res.Output) != `{"city":"Oslo","temp_c":20}` {
		t.Errorf("Output = %s", res.Output)
	}
	reqs := model.Requests()
	last := reqs[1].Messages[len(reqs[1].Messages)-1]
	if last.Role != events.RoleUser || !strings.Contains(last.Text(), `"temp_c"`) || !strings.Contains(last.Text(), "required") {
		t.Fatalf("repair message = %+v, want a user message naming the missing temp_c", last)
	}
	if reqs[1].ResponseFormat == nil {
		t.Error("the repair call has no response_format")
	}
}

func TestStructuredOutputFailsAfterTheRepair(t *testing.T) {
	model := llmtest.NewScripted(llmtest.TextStep(`{"city":"Oslo"}`), llmtest.TextStep(`{"city":"Oslo","temp_c":"warm"}`))
	rec := &recorder{}
	w := mustNew(t, worker.Config{Provider: model, Options: events.ModelOptions{ResponseFormat: jsonFormat()}, Observer: rec})
	res := mustRun(t, w, events.UserText("Weather in Oslo as JSON"))
	if res.Status != worker.StatusFailed || res.Code != worker.CodeInvalidOutput || !errors.Is(res.Err(), worker.ErrInvalidOutput) {
		t.Fatalf("status %s code %s err %v, want failed invalid_output", res.Status, res.Code, res.Err())
	}
	if !strings.Contains(res.Reason, `"temp_c"`) || !strings.Contains(res.Reason, "number") {
		t.Errorf("reason %q does not name the violation (temp_c must be a number)", res.Reason)
	}
	if model.Calls() != 2 {
		t.Errorf("%d model calls, want 2 (one repair)", model.Calls())
	}
	if res.Output != nil {
		t.Errorf("Output %s on a failed turn", res.Output)
	}
	failed := rec.ofType(events.TypeTurnFailed)
	if len(failed) != 1 || failed[0].(events.TurnFailed).Code != "invalid_output" {
		t.Errorf("llmw.turn.failed = %+v", failed)
	}
}

func TestStructuredOutputWithoutRepairs(t *testing.T) {
	model := llmtest.NewScripted(llmtest.TextStep(`not json`))
	w := mustNew(t, worker.Config{Provider: model, OutputRepairs: worker.NoRepairs,
		Options: events.ModelOptions{ResponseFormat: &events.ResponseFormat{Type: events.FormatJSON}}})
	res := mustRun(t, w, events.UserText("JSON please"))
	if res.Code != worker.CodeInvalidOutput || model.Calls() != 1 || !strings.Contains(res.Reason, "not valid JSON") {
		t.Fatalf("code %s after %d calls: %s", res.Code, model.Calls(), res.Reason)
	}
}

func TestStructuredOutputJSONMustBeAnObject(t *testing.T) {
	model := llmtest.NewScripted(llmtest.TextStep(`[1,2]`), llmtest.TextStep(`{"n": [1, 2]}`))
	w := mustNew(t, worker.Config{Provider: model, Options: events.ModelOptions{ResponseFormat: &events.ResponseFormat{Type: events.FormatJSON}}})
	res := mustRun(t, w, events.UserText("JSON please"))
	if res.Status != worker.StatusCompleted || string(res.Output) != `{"n":[1,2]}` {
		t.Fatalf("status %s output %s: %s", res.Status, res.Output, res.Reason)
	}
}

// A repair is a model call: when max_steps leaves none, the turn fails
// with invalid_output at once and says why.
func TestStructuredOutputRepairNeedsAStep(t *testing.T) {
	model := llmtest.NewScripted(llmtest.TextStep(`{}`))
	w := mustNew(t, worker.Config{Provider: model, MaxSteps: 1, Options: events.ModelOptions{ResponseFormat: jsonFormat()}})
	res := mustRun(t, w, events.UserText("JSON please"))
	if res.Code != worker.CodeInvalidOutput || model.Calls() != 1 || !strings.Contains(res.Reason, "max_steps") {
		t.Fatalf("code %s after %d calls: %s", res.Code, model.Calls(), res.Reason)
	}
}

func TestRunStructured(t *testing.T) {
	type Weather struct {
		City  string  `json:"city"`
		TempC float64 `json:"temp_c"`
	}
	format, err := worker.OutputFormat[Weather]()
	if err != nil {
		t.Fatal(err)
	}
	var schema map[string]any
	if err := json.Unmarshal(format.Schema, &schema); err != nil || schema["type"] != "object" {
		t.Fatalf("schema %s: %v", format.Schema, err)
	}
	if req, _ := schema["required"].([]any); len(req) != 2 {
		t.Errorf("schema %s: want city and temp_c required", format.Schema)
	}
	model := llmtest.NewScripted(llmtest.TextStep(`{"city":"Oslo","temp_c":4}`))
	w := mustNew(t, worker.Config{Provider: model, Options: events.ModelOptions{ResponseFormat: format}})
	v, res, err := worker.RunStructured[Weather](context.Background(), w, []events.Message{events.UserText("Oslo?")})
	if err != nil || v != (Weather{"Oslo", 4}) || res.Status != worker.StatusCompleted {
		t.Fatalf("RunStructured = %+v, %v, %v", v, res, err)
	}

	// A turn whose answer never fits: the error is the turn's.
	model = llmtest.NewScripted(llmtest.TextStep(`{}`), llmtest.TextStep(`{}`))
	w = mustNew(t, worker.Config{Provider: model, Options: events.ModelOptions{ResponseFormat: format}})
	if _, res, err = worker.RunStructured[Weather](context.Background(), w, []events.Message{events.UserText("Oslo?")}); !errors.Is(err, worker.ErrInvalidOutput) || res == nil {
		t.Fatalf("RunStructured = %v, %v; want ErrInvalidOutput with the result", res, err)
	}

	w = mustNew(t, worker.Config{Provider: llmtest.NewScripted()})
	if _, _, err := worker.RunStructured[Weather](context.Background(), w, nil); !errors.Is(err, worker.ErrNoOutput) {
		t.Fatalf("RunStructured without a response format = %v, want ErrNoOutput", err)
	}
}

// pngBytes starts with the PNG signature, which is what the part
// validation sniffs.
var pngBytes = []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00\x1f\x15\xc4\x89")

// An image a Go tool returns is in the tool_result of the next model
// call, in the llmw.tool.result event and in what after_tool_call sees.
func TestToolResultWithAnImage(t *testing.T) {
	shot := tool.Must("screenshot", "Takes a screenshot.", func(context.Context, struct{}) (tool.Content, error) {
		return tool.Content{events.TextPart("the screen:"), events.ImagePart("image/png", pngBytes)}, nil
	})
	var seen events.ToolResult
	hooks := &hook.Chain{}
	_ = hooks.AfterToolCall(hook.AfterToolCallFunc(func(_ context.Context, in *hook.ToolResultInput) (hook.AfterToolCallResult, error) {
		seen = in.Result
		return hook.AfterToolCallResult{}, nil
	}), hook.Options{Name: "look"})
	model := llmtest.NewScripted(llmtest.ToolStep(llmtest.ToolCallSpec{ID: "c1", Name: "screenshot", Input: `{}`}), llmtest.TextStep("A screen."))
	rec := &recorder{}
	w := mustNew(t, worker.Config{Provider: model, Tools: []tool.Tool{shot}, Hooks: hooks, Observer: rec})
	res := mustRun(t, w, events.UserText("What is on my screen?"))
	if res.Status != worker.StatusCompleted {
		t.Fatalf("status %s: %s", res.Status, res.Reason)
	}
	want := []events.Part{events.TextPart("the screen:"), events.ImagePart("image/png", pngBytes)}
	req := model.Requests()[1]
	tr := req.Messages[len(req.Messages)-1].Content[0]
	if tr.Type != events.PartToolResult || tr.ToolUseID != "c1" || !reflect.DeepEqual(tr.Parts, want) || tr.Content != "the screen:" {
		t.Fatalf("tool_result sent to the model = %+v, want parts %+v", tr, want)
	}
	if !reflect.DeepEqual(seen.Parts, want) {
		t.Errorf("after_tool_call saw parts %+v", seen.Parts)
	}
	results := rec.ofType(events.TypeToolResult)
	if len(results) != 1 || !reflect.DeepEqual(results[0].(events.ToolCallResult).Parts, want) {
		t.Errorf("llmw.tool.result = %+v", results)
	}
	// On the wire the content is the array of parts.
	b, err := json.Marshal(results[0])
	if err != nil || !strings.Contains(string(b), `"content":[{"type":"text","text":"the screen:"},{"type":"image","media_type":"image/png","data":"`) {
		t.Errorf("llmw.tool.result JSON = %s (%v)", b, err)
	}
}

func TestToolResultWithAnInvalidPart(t *testing.T) {
	bad := tool.Must("bad", "Returns a JPEG that is a PNG.", func(context.Context, struct{}) (tool.Content, error) {
		return tool.Content{events.ImagePart("image/jpeg", pngBytes)}, nil
	})
	model := llmtest.NewScripted(llmtest.ToolStep(llmtest.ToolCallSpec{ID: "c1", Name: "bad", Input: `{}`}), llmtest.TextStep("ok"))
	w := mustNew(t, worker.Config{Provider: model, Tools: []tool.Tool{bad}})
	mustRun(t, w, events.UserText("go"))
	req := model.Requests()[1]
	tr := req.Messages[len(req.Messages)-1].Content[0]
	if !tr.IsError || tr.Parts != nil || !strings.Contains(tr.Content, `"bad"`) || !strings.Contains(tr.Content, "image/png") {
		t.Fatalf("tool_result = %+v, want an error naming the tool and what the data holds", tr)
	}
}

// A result with more inline media than Config.MaxToolResult is an error
// result naming the tool.
func TestToolResultAboveMaxToolResult(t *testing.T) {
	big := tool.Must("camera", "Takes a big picture.", func(context.Context, struct{}) (tool.Content, error) {
		return tool.Content{events.ImagePart("image/png", append(append([]byte{}, pngBytes...), make([]byte, 4096)...))}, nil
	})
	model := llmtest.NewScripted(llmtest.ToolStep(llmtest.ToolCallSpec{ID: "c1", Name: "camera", Input: `{}`}), llmtest.TextStep("ok"))
	w := mustNew(t, worker.Config{Provider: model, Tools: []tool.Tool{big}, MaxToolResult: 4096})
	mustRun(t, w, events.UserText("go"))
	req := model.Requests()[1]
	tr := req.Messages[len(req.Messages)-1].Content[0]
	if !tr.IsError || tr.Parts != nil || !strings.Contains(tr.Content, `"camera"`) || !strings.Contains(tr.Content, "4096") {
		t.Fatalf("tool_result = %+v, want an error naming the tool and the bound", tr)
	}
}

// A turn paused by on_turn_end after a fitting answer completes on its
// resume with that answer as its output.
func TestStructuredOutputAfterAnOnTurnEndPause(t *testing.T) {
	hooks := &hook.Chain{}
	_ = hooks.OnTurnEnd(hook.TurnEndFunc(func(context.Context, *hook.TurnEndInput) (hook.TurnEndResult, error) {
		return hook.TurnEndResult{Action: hook.TurnPause, Reason: "review"}, nil
	}), hook.Options{Name: "review"})
	model := llmtest.NewScripted(llmtest.TextStep(`{"city":"Oslo","temp_c":3}`))
	w := mustNew(t, worker.Config{Provider: model, Hooks: hooks, Options: events.ModelOptions{ResponseFormat: jsonFormat()}})
	res := mustRun(t, w, events.UserText("Oslo?"))
	if res.Status != worker.StatusPaused || res.Output != nil {
		t.Fatalf("status %s output %s, want paused without output", res.Status, res.Output)
	}
	// The checkpoint is stored as JSON and resumed by another worker.
	b, err := json.Marshal(res.State)
	if err != nil {
		t.Fatal(err)
	}
	var cp worker.Checkpoint
	if err := json.Unmarshal(b, &cp); err != nil {
		t.Fatal(err)
	}
	w2 := mustNew(t, worker.Config{Provider: llmtest.NewScripted(), Hooks: hooks, Options: events.ModelOptions{ResponseFormat: jsonFormat()}})
	res, err = w2.Resume(context.Background(), &cp, nil)
	if err != nil || res.Status != worker.StatusCompleted || string(res.Output) != `{"city":"Oslo","temp_c":3}` {
		t.Fatalf("Resume = %+v, %v; want completed with the output", res, err)
	}
}

// The repairs made are in the checkpoint: a turn continued elsewhere
// after its repair step does not get another one.
func TestOutputRepairsSurviveACheckpoint(t *testing.T) {
	var last *worker.Checkpoint
	model := llmtest.NewScripted(llmtest.TextStep(`{}`))
	w := mustNew(t, worker.Config{Provider: model, Options: events.ModelOptions{ResponseFormat: jsonFormat()},
		Checkpoint: func(_ context.Context, cp *worker.Checkpoint) error {
			last = cp
			if cp.Step == 1 {
				return errors.New("the replica dies before its second model call")
			}
			return nil
		}})
	mustRun(t, w, events.UserText("Oslo?"))
	if last == nil || last.OutputRepairs != 1 || last.Step != 1 {
		t.Fatalf("checkpoint before the repair call = %+v, want step 1 with one repair made", last)
	}
	model2 := llmtest.NewScripted(llmtest.TextStep(`{"city":"Oslo"}`), llmtest.TextStep(`{"city":"Oslo","temp_c":1}`))
	w2 := mustNew(t, worker.Config{Provider: model2, Options: events.ModelOptions{ResponseFormat: jsonFormat()}})
	res, err := w2.RunFrom(context.Background(), last)
	if err != nil || res.Code != worker.CodeInvalidOutput || model2.Calls() != 1 {
		t.Fatalf("RunFrom = %+v (%v) after %d calls; want invalid_output after the one repair call", res, err, model2.Calls())
	}
}

// A step whose model call is made again sends its warnings once.
func TestWarningsOncePerStep(t *testing.T) {
	ws := []events.Warning{{Setting: "seed", Message: "not sent"}}
	model := llmtest.NewScripted(llmtest.FailMidStep(errors.New("connection reset"), "par"), llmtest.TextStep("whole"))
	rec := &recorder{}
	w := mustNew(t, worker.Config{Provider: warner{model, ws}, StepAttempts: 2, Observer: rec})
	res := mustRun(t, w, events.UserText("hi"))
	if res.Status != worker.StatusCompleted || model.Calls() != 2 {
		t.Fatalf("status %s after %d calls: %s", res.Status, model.Calls(), res.Reason)
	}
	if got := rec.ofType(events.TypeTurnWarning); len(got) != 1 {
		t.Fatalf("%d warnings for one step made twice, want 1", len(got))
	}
}
