package transcript_test

import (
	"testing"

	"github.com/llmworker/llmworker/pkg/natstest"
	"github.com/llmworker/llmworker/pkg/transcript"
)

// BenchmarkRead reads a session of 2,000 items of 1 KB (2 MB), the
// transcript a long session's turn starts from, on file storage.
func BenchmarkRead(b *testing.B) {
	s := natstest.Start(b, natstest.Options{Provision: true, FileStorage: true})
	st := transcript.New(s.JS, "")
	ctx := natstest.Context(b)
	ref := transcript.Ref{}
	var err error
	for range 20 {
		if ref, err = st.Append(ctx, transcript.KindSession, "s", ref, ref.Seq, texts(100, 1000, "item")); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for range b.N {
		msgs, err := st.Read(ctx, transcript.KindSession, "s", transcript.Range{Upto: ref})
		if err != nil || len(msgs) != 2000 {
			b.Fatal(len(msgs), err)
		}
	}
}

// BenchmarkAppend appends one step's message of 1 KB to a turn's
// transcript on file storage: what a step's state write adds.
func BenchmarkAppend(b *testing.B) {
	s := natstest.Start(b, natstest.Options{Provision: true, FileStorage: true})
	st := transcript.New(s.JS, "")
	ctx := natstest.Context(b)
	ref := transcript.Ref{}
	msg := texts(1, 1000, "step")
	var err error
	b.ResetTimer()
	for range b.N {
		if ref, err = st.Append(ctx, transcript.KindTurn, "t", ref, ref.Seq, msg); err != nil {
			b.Fatal(err)
		}
	}
}
