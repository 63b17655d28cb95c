package events_test

import (
	"errors"
	"fmt"

	"github.com/llmworker/llmworker/pkg/events"
)

// Decoding names the field that is missing or of the wrong type.
func ExampleDecode() {
	_, err := events.Decode[events.TurnRequest]([]byte(
		`{"turn_id":"t1","model":"openai:gpt-4.1-mini","messages":[{"role":"user","content":[{"type":"tool_use","name":"f"}]}]}`))
	var fe *events.FieldError
	fmt.Println(errors.As(err, &fe), errors.Is(err, events.ErrInvalid))
	fmt.Println(fe.Field, fe.Problem)

	_, err = events.Decode[events.ResumeRequest]([]byte(`{"turn_id":"t1","decisions":{"call_1":"maybe"}}`))
	fmt.Println(err)
	// Output:
	// true true
	// messages[0].content[0].id is required
	// field "decisions.call_1" must be a decision: "approve", "deny" or {"input": {...}}, got "maybe"
}

// A worker event travels as a binary-mode CloudEvent: attributes in ce-
// headers, the data as the JSON body.
func ExampleEnvelope() {
	e, err := events.NewEnvelope(events.Source("turn", "r1"), events.TypeTextComplete,
		events.TextComplete{Step: 1, Index: 0, Text: "Hi!"})
	if err != nil {
		panic(err)
	}
	e.TurnID, e.Seq = "t1", 7
	h := e.BinaryHeader()
	fmt.Println(h[events.HeaderType][0], h[events.HeaderTurnID][0], h[events.HeaderSeq][0])

	back, err := events.DecodeEnvelope(h, e.Data)
	if err != nil {
		panic(err)
	}
	tc, err := events.DecodeData[events.TextComplete](back)
	fmt.Println(back.Source, tc.Text, err)
	// Output:
	// llmw.text.complete t1 7
	// /llmw/turn/r1 Hi! <nil>
}

func ExampleSubjects() {
	s := events.Subjects{} // prefix "llmw"
	fmt.Println(s.Events("", "t1", events.ChannelText))
	fmt.Println(s.ToolResult("t1", "call_1"))
	fmt.Println(events.NewSubjects("acme").LLMStream("r1"))
	// Output:
	// llmw.events._.t1.text
	// llmw.tool.result.t1.call_1
	// acme.llm.stream.r1
}
