package llm_test

import (
	"reflect"
	"testing"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/llm"
)

// An assistant message's images and files move to the user turn after
// it: into the next user or tool message after its tool results, else
// into a new user message; the fields still name the request's parts.
func TestMoveAssistantMedia(t *testing.T) {
	png := events.Part{Type: events.PartImage, MediaType: "image/png", Data: "aW1n"}
	pdf := events.Part{Type: events.PartFile, MediaType: "application/pdf", URL: "https://example.com/a.pdf"}
	lead, note := events.TextPart(llm.AssistantMediaLead), events.TextPart(llm.AssistantMediaNote)
	call := events.ToolUsePart("c1", "render", nil)
	result := events.ToolResultPart("c1", "done", false)
	in := []events.Message{
		events.UserText("draw"),
		{Role: events.RoleAssistant, Content: []events.Part{events.TextPart("here"), call, png}},
		{Role: events.RoleTool, Content: []events.Part{result, events.TextPart("and?")}},
		{Role: events.RoleAssistant, Content: []events.Part{events.ThinkingPart("hm", "sig"), pdf}},
	}
	orig := make([]events.Message, len(in))
	for i, m := range in {
		orig[i] = events.Message{Role: m.Role, Content: append([]events.Part(nil), m.Content...)}
	}
	got, fields := llm.MoveAssistantMedia(in)
	want := []events.Message{
		events.UserText("draw"),
		{Role: events.RoleAssistant, Content: []events.Part{events.TextPart("here"), call}},
		{Role: events.RoleTool, Content: []events.Part{result, lead, png, events.TextPart("and?")}},
		{Role: events.RoleAssistant, Content: []events.Part{events.ThinkingPart("hm", "sig"), note}},
		{Role: events.RoleUser, Content: []events.Part{lead, pdf}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got  %+v\nwant %+v", got, want)
	}
	if !reflect.DeepEqual(in, orig) {
		t.Errorf("the request's messages changed: %+v", in)
	}
	for _, c := range []struct {
		i, j int
		want string
	}{
		{0, 0, "messages[0].content[0]"},
		{1, 1, "messages[1].content[1]"},
		{2, 0, "messages[2].content[0]"},
		{2, 2, "messages[1].content[2]"}, // the image
		{2, 3, "messages[2].content[1]"},
		{4, 1, "messages[3].content[1]"}, // the pdf
	} {
		if f := fields.Part(c.i, c.j); f != c.want {
			t.Errorf("Part(%d, %d) = %s, want %s", c.i, c.j, f, c.want)
		}
	}
	if f := fields.Message(4); f != "messages[3]" {
		t.Errorf("Message(4) = %s, want messages[3]", f)
	}

	// Without assistant media the transcript is the request's.
	plain := []events.Message{events.UserText("hi"), {Role: events.RoleUser, Content: []events.Part{png}}}
	got, fields = llm.MoveAssistantMedia(plain)
	if &got[0] != &plain[0] || fields.Part(1, 0) != "messages[1].content[0]" || fields.Message(1) != "messages[1]" {
		t.Errorf("a transcript without assistant media was rearranged: %+v", got)
	}
}
