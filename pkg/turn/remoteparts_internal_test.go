package turn

import (
	"context"
	"strings"
	"testing"

	"github.com/llmworker/llmworker/pkg/media"
)

// A file larger than a media object may be (media.MaxSize) is not
// stored: it is a note naming its size and the limit.
func TestRemoteFileOverTheMediaLimitIsANote(t *testing.T) {
	raw := make([]byte, media.MaxSize+1)
	copy(raw, "%PDF-1.7\n")
	task := &RemoteTask{ID: "t1", State: RemoteCompleted, Artifacts: []RemoteArtifact{{ID: "a1", Parts: []RemotePart{
		{Kind: RemoteTextPart, Text: "The scan:"},
		{Kind: RemoteFilePart, Raw: raw, MediaType: "application/pdf", Name: "scan.pdf"},
	}}}}
	store := func(context.Context) (mediaPutter, error) {
		t.Fatal("the file was offered to the store")
		return nil, nil
	}
	content, notes, err := remoteContent(context.Background(), task, "scanner", store)
	if err != nil {
		t.Fatal(err)
	}
	if len(content) != 1 || len(notes) != 1 {
		t.Fatalf("content %d parts, notes %q; want one text with the note", len(content), notes)
	}
	want := `The scan:
[the file "scan.pdf" (application/pdf) of artifact a1 from the remote agent scanner is left out: its 67108865 bytes are more than the 67108864 a media object holds]`
	if content[0].Text != want {
		t.Fatalf("answer %q; want %q", content[0].Text, want)
	}
}

// Artifacts of text only answer as RemoteTask.Answer joins them: one a
// line, data as its JSON, an artifact with no parts by its text.
func TestRemoteTextOnlyAnswerIsAsAnswer(t *testing.T) {
	task := &RemoteTask{ID: "t1", State: RemoteCompleted, Artifacts: []RemoteArtifact{
		{ID: "a1", Text: "Sunny", Parts: []RemotePart{{Kind: RemoteTextPart, Text: "Sun"}, {Kind: RemoteTextPart, Text: "ny"}}},
		{ID: "a2", Text: ""},
		{ID: "a3", Text: `{"t":21}`, Parts: []RemotePart{{Kind: RemoteDataPart, Data: []byte(`{"t":21}`)}}},
		{ID: "a4", Text: "in Paris"},
	}}
	content, notes, err := remoteContent(context.Background(), task, "weather", nil)
	if err != nil || len(notes) != 0 {
		t.Fatal(err, notes)
	}
	if len(content) != 1 || content[0].Text != task.Answer() || !strings.Contains(content[0].Text, "Sunny\n{\"t\":21}\nin Paris") {
		t.Fatalf("answer %+v; want one text %q", content, task.Answer())
	}
}
