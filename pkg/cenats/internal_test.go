package cenats

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/llmworker/llmworker/pkg/events"
)

// The hand-written structured encoding must say what the events codec says.
func TestAppendStructuredMatchesCodec(t *testing.T) {
	tm := time.Date(2026, 1, 2, 3, 4, 5, 600700800, time.UTC)
	for _, tmpl := range []events.Envelope{
		{Source: "/llmw/ingest/x"},
		{Source: "/llmw/ingest/x", Subject: "turn \"1\"", TurnID: "turn \"1\"", SessionID: "s\u2028", TraceParent: "00-ab-cd-01"},
	} {
		for _, seq := range []uint64{1, 1<<31 - 1, 1 << 31} {
			data := events.TextDelta(3, "a \"quoted\"\n<tag>").AppendJSON(nil)
			got := appendStructured(nil, &tmpl, "id-1", events.TypeLLMBlockDelta, tm, seq, data)

			want := tmpl
			want.ID, want.Type, want.Time, want.Seq, want.Data = "id-1", events.TypeLLMBlockDelta, tm, seq, data
			ref, err := want.StructuredBody()
			if err != nil {
				t.Fatal(err)
			}
			var g, r map[string]any
			if err := json.Unmarshal(got, &g); err != nil {
				t.Fatalf("not JSON: %v\n%s", err, got)
			}
			if err := json.Unmarshal(ref, &r); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(g, r) {
				t.Errorf("seq %d:\n got %s\nwant %s", seq, got, ref)
			}
			env, err := events.DecodeEnvelope(nil, got)
			if err != nil {
				t.Fatalf("DecodeEnvelope: %v\n%s", err, got)
			}
			if env.Seq != seq || env.ID != "id-1" || env.TurnID != tmpl.TurnID || !env.Time.Equal(tm) || !jsonEqual(env.Data, data) {
				t.Errorf("decoded %+v", env)
			}
		}
	}
}

func jsonEqual(a, b []byte) bool {
	var x, y any
	return json.Unmarshal(a, &x) == nil && json.Unmarshal(b, &y) == nil && reflect.DeepEqual(x, y)
}
