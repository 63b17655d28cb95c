package transcript_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/natstest"
	"github.com/llmworker/llmworker/pkg/transcript"
)

// maxPayload is the test server's max_payload: a stock server's 1 MiB
// scaled down, so that transcripts far above it stay quick to write.
const maxPayload = 64 << 10

func start(t *testing.T) (*transcript.Store, jetstream.JetStream, context.Context) {
	t.Helper()
	s := natstest.Start(t, natstest.Options{Provision: true, MaxPayload: maxPayload})
	return transcript.New(s.JS, ""), s.JS, natstest.Context(t)
}

func texts(n, size int, tag string) []events.Message {
	out := make([]events.Message, n)
	for i := range out {
		body := fmt.Sprintf("%s %d ", tag, i)
		body += strings.Repeat("x", max(size-len(body), 0))
		if i%2 == 0 {
			out[i] = events.UserText(body)
		} else {
			out[i] = events.AssistantText(body)
		}
	}
	return out
}

func sameTexts(t *testing.T, got, want []events.Message) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("read %d items, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i].Role != want[i].Role || got[i].Text() != want[i].Text() {
			t.Fatalf("item %d: %s %.30q…, want %s %.30q…", i, got[i].Role, got[i].Text(), want[i].Role, want[i].Text())
		}
	}
}

// A transcript far larger than a message is stored one item a message
// over many appends, and read back whole and from a position.
func TestAppendAndReadFarAboveMaxPayload(t *testing.T) {
	st, _, ctx := start(t)
	var all []events.Message
	ref := transcript.Ref{}
	for a := 0; a < 10; a++ {
		msgs := texts(10, 20_000, fmt.Sprintf("append %d", a))
		var err error
		if ref, err = st.Append(ctx, transcript.KindSession, "s1", ref, ref.Seq, msgs); err != nil {
			t.Fatal(err)
		}
		all = append(all, msgs...)
	}
	if ref.Len != 100 || ref.Seq != 100 {
		t.Fatalf("ref %+v, want 100 items ending at stream sequence 100", ref)
	}
	got, err := st.Read(ctx, transcript.KindSession, "s1", transcript.Range{Upto: ref})
	if err != nil {
		t.Fatal(err)
	}
	sameTexts(t, got, all)
	// From position 90, starting the read at its stream sequence.
	got, err = st.Read(ctx, transcript.KindSession, "s1", transcript.Range{Upto: ref, From: 90, Start: 91})
	if err != nil {
		t.Fatal(err)
	}
	sameTexts(t, got, all[90:])
	// A Ref of an earlier length reads that transcript, not what followed.
	got, err = st.Read(ctx, transcript.KindSession, "s1", transcript.Range{Upto: transcript.Ref{Len: 10, Seq: 10}})
	if err != nil {
		t.Fatal(err)
	}
	sameTexts(t, got, all[:10])
}

// Of two writers that expect one tail, one appends and the other gets
// ErrConflict with nothing stored.
func TestTwoWritersOneWins(t *testing.T) {
	st, js, ctx := start(t)
	ref, err := st.Append(ctx, transcript.KindTurn, "t1", transcript.Ref{}, 0, texts(2, 100, "base"))
	if err != nil {
		t.Fatal(err)
	}
	// An empty subject is a tail too: a second first append conflicts.
	if _, err := st.Append(ctx, transcript.KindTurn, "t1", transcript.Ref{}, 0, texts(1, 100, "other")); !errors.Is(err, transcript.ErrConflict) {
		t.Fatalf("second writer at position 0: %v, want ErrConflict", err)
	}
	a, err := st.Append(ctx, transcript.KindTurn, "t1", ref, ref.Seq, texts(1, 100, "a"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = st.Append(ctx, transcript.KindTurn, "t1", ref, ref.Seq, texts(1, 100, "b"))
	if !errors.Is(err, transcript.ErrConflict) {
		t.Fatalf("second writer at position %d: %v, want ErrConflict", ref.Len, err)
	}
	info, err := js.Stream(ctx, events.StreamTranscripts)
	if err != nil {
		t.Fatal(err)
	}
	if n := info.CachedInfo().State.Msgs; n != 3 {
		t.Fatalf("the stream holds %d messages, want 3 (the loser stored nothing)", n)
	}
	if tail, err := st.Tail(ctx, transcript.KindTurn, "t1"); err != nil || tail != a.Seq {
		t.Fatalf("tail %d (%v), want %d", tail, err, a.Seq)
	}
}

// Items a writer appended but never recorded in a Ref (a replica that
// lost its turn, a session record not written) are not read: a writer
// that continues from the recorded Ref appends after the subject's tail
// and its Ref reads the recorded items and its own.
func TestItemsOffTheChainAreNotRead(t *testing.T) {
	st, _, ctx := start(t)
	base := texts(3, 100, "base")
	ref, err := st.Append(ctx, transcript.KindTurn, "t1", transcript.Ref{}, 0, base)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Append(ctx, transcript.KindTurn, "t1", ref, ref.Seq, texts(2, 100, "stale")); err != nil {
		t.Fatal(err)
	}
	tail, err := st.Tail(ctx, transcript.KindTurn, "t1")
	if err != nil {
		t.Fatal(err)
	}
	mine := texts(2, 100, "claimant")
	ref2, err := st.Append(ctx, transcript.KindTurn, "t1", ref, tail, mine)
	if err != nil {
		t.Fatal(err)
	}
	if ref2.Len != 5 {
		t.Fatalf("ref %+v, want 5 items", ref2)
	}
	got, err := st.Read(ctx, transcript.KindTurn, "t1", transcript.Range{Upto: ref2})
	if err != nil {
		t.Fatal(err)
	}
	sameTexts(t, got, append(base, mine...))
}

// An item larger than a message is stored in chunks and read back whole.
func TestItemLargerThanAMessage(t *testing.T) {
	st, _, ctx := start(t)
	big := texts(3, 5*maxPayload/2, "huge")
	ref, err := st.Append(ctx, transcript.KindSession, "s1", transcript.Ref{}, 0, big)
	if err != nil {
		t.Fatal(err)
	}
	if ref.Len != 3 || ref.Seq < 9 {
		t.Fatalf("ref %+v, want 3 items in at least 9 messages", ref)
	}
	got, err := st.Read(ctx, transcript.KindSession, "s1", transcript.Range{Upto: ref})
	if err != nil {
		t.Fatal(err)
	}
	sameTexts(t, got, big)
}

// A transcript whose first positions are kept elsewhere (Range.First)
// reads from there; one whose items the stream lost is ErrMissing.
func TestFirstAndMissing(t *testing.T) {
	st, js, ctx := start(t)
	msgs := texts(4, 100, "after inline")
	ref, err := st.Append(ctx, transcript.KindSession, "s1", transcript.Ref{Len: 7}, 0, msgs)
	if err != nil {
		t.Fatal(err)
	}
	if ref.Len != 11 {
		t.Fatalf("ref %+v, want 11 items", ref)
	}
	got, err := st.Read(ctx, transcript.KindSession, "s1", transcript.Range{Upto: ref, First: 7})
	if err != nil {
		t.Fatal(err)
	}
	sameTexts(t, got, msgs)
	if _, err := st.Read(ctx, transcript.KindSession, "s1", transcript.Range{Upto: ref}); !errors.Is(err, transcript.ErrMissing) {
		t.Fatalf("reading positions 0–6 the stream never had: %v, want ErrMissing", err)
	}
	s, err := js.Stream(ctx, events.StreamTranscripts)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteMsg(ctx, 2); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Read(ctx, transcript.KindSession, "s1", transcript.Range{Upto: ref, First: 7}); !errors.Is(err, transcript.ErrMissing) {
		t.Fatalf("reading with an item deleted: %v, want ErrMissing", err)
	}
}

func TestInvalid(t *testing.T) {
	st, _, ctx := start(t)
	for _, c := range []struct {
		kind transcript.Kind
		key  string
	}{{"chat", "k"}, {transcript.KindTurn, "a.b"}, {transcript.KindTurn, ""}, {transcript.KindSession, "a*"}} {
		if _, err := st.Append(ctx, c.kind, c.key, transcript.Ref{}, 0, texts(1, 10, "x")); !errors.Is(err, transcript.ErrInvalid) {
			t.Errorf("append to %s %q: %v, want ErrInvalid", c.kind, c.key, err)
		}
		if _, err := st.Read(ctx, c.kind, c.key, transcript.Range{Upto: transcript.Ref{Len: 1, Seq: 1}}); !errors.Is(err, transcript.ErrInvalid) {
			t.Errorf("read of %s %q: %v, want ErrInvalid", c.kind, c.key, err)
		}
	}
}
