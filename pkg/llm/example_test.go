package llm_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/llm"
	"github.com/llmworker/llmworker/pkg/llm/llmtest"
)

// A stream in the style of OpenAI Chat Completions: deltas only, no status,
// no block starts or stops. Normalize makes it well-formed.
func ExampleNormalize() {
	raw := llm.SliceStream(
		events.TextDelta(0, "Hello"),
		events.TextDelta(0, "!"),
		events.UsageEvent{OutputTokens: events.Int64(2)},
	)
	s := llm.Normalize(context.Background(), raw, llm.NormalizeOptions{})
	defer s.Close()
	for s.Next() {
		b, _ := events.MarshalEvent(s.Current())
		fmt.Println(s.Current().EventType(), string(b))
	}
	// Output:
	// llmw.llm.status {"status":"started"}
	// llmw.llm.block.start {"index":0,"block_type":"text"}
	// llmw.llm.block.delta {"index":0,"text":"Hello"}
	// llmw.llm.block.delta {"index":0,"text":"!"}
	// llmw.llm.usage {"output_tokens":2}
	// llmw.llm.block.stop {"index":0,"block_type":"text","stop_reason":null}
	// llmw.llm.status {"status":"completed"}
}

func ExampleNormalize_streamError() {
	p := llmtest.NewScripted(llmtest.FailMidStep(errors.New("connection reset"), "Hel"))
	raw, _ := p.Stream(context.Background(), &llm.Request{})
	evs, _ := llm.Collect(llm.Normalize(context.Background(), raw, llm.NormalizeOptions{}))
	for _, ev := range evs[3:] {
		b, _ := events.MarshalEvent(ev)
		fmt.Println(string(b))
	}
	fmt.Println(llm.CheckWellFormed(evs))
	// Output:
	// {"code":"stream_error","message":"connection reset"}
	// {"index":0,"block_type":"text","reason":"stream error"}
	// {"status":"failed"}
	// <nil>
}

func ExampleScripted() {
	p := llmtest.NewScripted(
		llmtest.ToolStep(
			llmtest.ToolCallSpec{ID: "call_1", Name: "get_weather", Input: `{"city":"Tokyo"}`},
			llmtest.ToolCallSpec{ID: "call_2", Name: "get_time", Input: `{"tz":"JST"}`},
		),
		llmtest.TextStep("Sunny, ", "and 9 pm."),
	)
	for _, q := range []string{"weather?", "(tool results)"} {
		s, err := p.Stream(context.Background(), &llm.Request{Messages: []events.Message{events.UserText(q)}})
		if err != nil {
			panic(err)
		}
		evs, _ := llm.Collect(s)
		for _, ev := range evs {
			switch e := ev.(type) {
			case events.BlockStart:
				if e.BlockType == events.BlockToolUse {
					fmt.Println("call", e.ID, e.Name)
				}
			case events.BlockDelta:
				if e.Kind == events.DeltaText {
					fmt.Printf("text %q\n", e.Content)
				}
			}
		}
	}
	fmt.Println(len(p.Requests()), "requests; first asked:", p.Requests()[0].Messages[0].Text())
	_, err := p.Stream(context.Background(), &llm.Request{})
	fmt.Println(errors.Is(err, llmtest.ErrScriptExhausted))
	// Output:
	// call call_1 get_weather
	// call call_2 get_time
	// text "Sunny, "
	// text "and 9 pm."
	// 2 requests; first asked: weather?
	// true
}

func ExampleCheckWellFormed() {
	err := llm.CheckWellFormed([]events.Event{
		events.StatusEvent{Status: events.StatusStarted},
		events.TextDelta(0, "no start"),
		events.StatusEvent{Status: events.StatusCompleted},
	})
	fmt.Println(err)
	// Output: llm: malformed stream: event 1 (llmw.llm.block.delta): delta for block 0, which is not open
}
