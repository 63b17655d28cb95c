package tool_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/tool"
)

// pngData starts with the PNG signature, which part validation sniffs.
var pngData = []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00\x1f\x15\xc4\x89")

func TestTypedContentResult(t *testing.T) {
	want := tool.Content{events.TextPart("page "), events.TextPart("one"), events.ImagePart("image/png", pngData)}
	shot := tool.Must("shot", "Takes a screenshot.", func(context.Context, struct{}) (tool.Content, error) { return want, nil })
	text, err := shot.Execute(context.Background(), nil)
	if err != nil || text != "page one" {
		t.Fatalf("Execute = %q, %v; want the text of the text parts", text, err)
	}
	text, parts, err := tool.ExecuteContent(context.Background(), shot, nil)
	if err != nil || text != "page one" || !reflect.DeepEqual(parts, want) {
		t.Fatalf("ExecuteContent = %q, %+v, %v", text, parts, err)
	}

	// A typed tool with a text result has no parts.
	echo := tool.Must("echo", "Echoes.", func(context.Context, struct{}) (string, error) { return "hi", nil })
	if text, parts, err := tool.ExecuteContent(context.Background(), echo, nil); text != "hi" || parts != nil || err != nil {
		t.Fatalf("ExecuteContent of a text tool = %q, %+v, %v", text, parts, err)
	}

	// []events.Part is a Content too, and an empty one is a result of no
	// parts, not a text result.
	empty := tool.Must("empty", "Nothing.", func(context.Context, struct{}) ([]events.Part, error) { return nil, nil })
	if _, parts, err := tool.ExecuteContent(context.Background(), empty, nil); parts == nil || len(parts) != 0 || err != nil {
		t.Fatalf("ExecuteContent of an empty []events.Part = %#v, %v", parts, err)
	}
}

func TestTypedContentResultIsChecked(t *testing.T) {
	bad := tool.Must("bad", "Mislabels a PNG.", func(context.Context, struct{}) (tool.Content, error) {
		return tool.Content{events.ImagePart("image/jpeg", pngData)}, nil
	})
	_, _, err := tool.ExecuteContent(context.Background(), bad, nil)
	if !errors.Is(err, tool.ErrExecutionFailed) || !strings.Contains(err.Error(), `"bad"`) || !strings.Contains(err.Error(), "content[0].data") {
		t.Fatalf("err = %v, want an execution error naming the tool and the part", err)
	}
}

// A tool that shows the model an image: its result is a Content of parts.
func ExampleContent() {
	type args struct {
		URL string `json:"url"`
	}
	screenshot := tool.Must("screenshot", "Takes a screenshot of a page.",
		func(_ context.Context, a args) (tool.Content, error) {
			png := pngData // the page, rendered
			return tool.Content{events.TextPart("the page at " + a.URL + ":"), events.ImagePart("image/png", png)}, nil
		})
	text, parts, err := tool.ExecuteContent(context.Background(), screenshot, json.RawMessage(`{"url":"https://example.com"}`))
	if err != nil {
		panic(err)
	}
	fmt.Println(text)
	for _, p := range parts {
		fmt.Println(p.Type, len(p.Data) > 0)
	}
	// Output:
	// the page at https://example.com:
	// text false
	// image true
}
