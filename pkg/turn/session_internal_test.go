package turn

import (
	"testing"

	"github.com/llmworker/llmworker/pkg/events"
)

// Of two turns of one session that end at once, the compaction that
// reaches further over the merged transcript is the session's, and one
// made over a transcript the other turn's messages now interleave is
// dropped; the start is where item To's first message lies.
func TestSessionEndPicksTheCompaction(t *testing.T) {
	// The turn started from a session of 14 messages, compacted up to 10
	// (start 100), reading items 10..13 at stream sequences 101..104.
	turnEnd := func(to int) *sessionEnd {
		return &sessionEnd{from: 14, base: 10, start: 100, seqs: []uint64{101, 102, 103, 104},
			compaction: &events.Compaction{ID: "t2.c1", To: to}}
	}
	sessionWith := func(id string, to int) *SessionRecord {
		return &SessionRecord{Compaction: &events.Compaction{ID: id, To: to}}
	}
	for _, c := range []struct {
		name   string
		end    *sessionEnd
		cur    *SessionRecord
		curLen int
		tail   uint64
		start  uint64
		kept   bool
	}{
		{name: "alone, within the session", end: turnEnd(12), cur: sessionWith("t1.c1", 10), curLen: 14, tail: 200, start: 103, kept: true},
		{name: "alone, into its own messages", end: turnEnd(16), cur: sessionWith("t1.c1", 10), curLen: 14, tail: 200, start: 201, kept: true},
		{name: "alone, at the session's end", end: turnEnd(14), cur: sessionWith("t1.c1", 10), curLen: 14, tail: 200, start: 201, kept: true},
		{name: "after another turn, within the session", end: turnEnd(13), cur: sessionWith("t1.c1", 10), curLen: 20, tail: 300, start: 104, kept: true},
		{name: "after another turn, at the session's end", end: turnEnd(14), cur: sessionWith("t1.c1", 10), curLen: 20, tail: 300, start: 105, kept: true},
		{name: "after another turn, into its own messages", end: turnEnd(16), cur: sessionWith("t1.c1", 10), curLen: 20, tail: 300},
		{name: "another turn's reaches further", end: turnEnd(12), cur: sessionWith("t3.c1", 13), curLen: 20, tail: 300},
		{name: "the session's own, unchanged", end: &sessionEnd{from: 14, base: 10, start: 100, compaction: &events.Compaction{ID: "t1.c1", To: 10}}, cur: sessionWith("t1.c1", 10), curLen: 14},
		{name: "none", end: &sessionEnd{from: 14}, cur: sessionWith("t1.c1", 10), curLen: 14},
		{name: "the session's first", end: &sessionEnd{from: 14, seqs: make([]uint64, 14), compaction: &events.Compaction{ID: "t2.c1", To: 0}}, cur: &SessionRecord{}, curLen: 14, kept: true},
	} {
		start, kept := c.end.compactionStart(c.cur, c.curLen, c.tail)
		if kept != c.kept || kept && start != c.start {
			t.Errorf("%s: kept %v start %d, want %v %d", c.name, kept, start, c.kept, c.start)
		}
	}
}
