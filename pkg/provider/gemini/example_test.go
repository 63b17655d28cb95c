package gemini_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/llm"
	"github.com/llmworker/llmworker/pkg/provider/gemini"
	"github.com/llmworker/llmworker/pkg/provider/providertest"
)

// A recorded function call without an id: the adapter synthesizes one, and
// the stop reason says the model wants the tool run.
func Example() {
	body, err := providertest.LoadFixture("gemini/function-call_gemini-2.0-flash.sse")
	if err != nil {
		fmt.Println(err)
		return
	}
	srv := providertest.Start(providertest.SSE(body))
	defer srv.Close()

	p, err := gemini.New(gemini.Config{APIKey: "key", BaseURL: srv.URL()})
	if err != nil {
		fmt.Println(err)
		return
	}
	s, err := p.Stream(context.Background(), &llm.Request{Model: "gemini:gemini-2.0-flash",
		Messages: []events.Message{events.UserText("capital of France?")}})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close()
	for s.Next() {
		switch e := s.Current().(type) {
		case events.BlockStart:
			fmt.Println("call:", e.Name, strings.HasPrefix(e.ID, gemini.SynthesizedIDPrefix))
		case events.BlockDelta:
			fmt.Println("input:", e.Content)
		case events.BlockStop:
			fmt.Println("stop:", e.StopReason)
		case events.StatusEvent:
			fmt.Println("status:", e.Status)
		}
	}
	// Output:
	// status: started
	// call: get_capital true
	// input: {"country":"France"}
	// stop: tool_use
	// status: completed
}

// A tool result with a screenshot: on Gemini 3 the image rides in the
// functionResponse's parts, where the model reads it.
func Example_toolResultImage() {
	body, err := providertest.LoadFixture("gemini/text-usage_gemini-2.0-flash-exp.sse")
	if err != nil {
		fmt.Println(err)
		return
	}
	srv := providertest.Start(providertest.SSE(body))
	defer srv.Close()
	p, err := gemini.New(gemini.Config{APIKey: "key", BaseURL: srv.URL()})
	if err != nil {
		fmt.Println(err)
		return
	}
	png := []byte("\x89PNG\r\n\x1a\n...")
	s, err := p.Stream(context.Background(), &llm.Request{Model: "gemini:gemini-3-pro-preview",
		Messages: []events.Message{
			events.UserText("What is on the screen?"),
			{Role: events.RoleAssistant, Content: []events.Part{events.ToolUsePart("call-1", "screenshot", nil)}},
			{Role: events.RoleTool, Content: []events.Part{events.ToolResultParts("call-1",
				[]events.Part{events.TextPart("1280x800"), events.ImagePart("image/png", png)}, false)}},
		}})
	if err != nil {
		fmt.Println(err)
		return
	}
	for s.Next() {
	}
	_ = s.Close()
	var sent struct {
		Contents []struct {
			Parts []struct {
				FunctionResponse *struct {
					Name     string         `json:"name"`
					Response map[string]any `json:"response"`
					Parts    []struct {
						InlineData struct {
							MIMEType string `json:"mimeType"`
						} `json:"inlineData"`
					} `json:"parts"`
				} `json:"functionResponse"`
			} `json:"parts"`
		} `json:"contents"`
	}
	if err := json.Unmarshal(srv.LastRequest().Body, &sent); err != nil {
		fmt.Println(err)
		return
	}
	fr := sent.Contents[2].Parts[0].FunctionResponse
	fmt.Println(fr.Name, fr.Response["output"], fr.Parts[0].InlineData.MIMEType)
	// Output:
	// screenshot 1280x800 image/png
}
