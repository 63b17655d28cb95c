//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/llmworker/llmworker/internal/replay"
	"github.com/llmworker/llmworker/pkg/events"
)

// How long a turn may take, crashes and redeliveries included. The slow
// tool takes 8–10 s and AckWait is 3–5 s, so these are generous.
const turnTimeout = 2 * time.Minute

// streamNames are the JetStream streams behind docs/protocol.md §5–§8, buckets
// included (a KV bucket B is the stream KV_B).
var streamNames = []string{
	events.StreamTurns, events.StreamEvents, events.StreamToolCalls, events.StreamToolResults, events.StreamTranscripts,
	"KV_" + events.BucketSessions, "KV_" + events.BucketTools, "KV_" + events.BucketHooks, "KV_" + events.BucketTurnState,
}

// Concurrent turns in every recorded provider format, on two turn and two
// toolexec replicas over a three-node cluster, all complete with one tool
// result per call.
func TestClusterTurns(t *testing.T) {
	t.Parallel()
	c := startCluster(t, clusterOpts{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, name := range streamNames {
		st, err := c.js.Stream(ctx, name)
		if err != nil {
			t.Fatalf("stream %s: %v", name, err)
		}
		info := st.CachedInfo()
		if info.Config.Replicas != replicas || info.Cluster == nil || len(info.Cluster.Replicas) != replicas-1 {
			t.Errorf("stream %s: replicas %d, cluster %+v; want R%d on all three nodes", name, info.Config.Replicas, info.Cluster, replicas)
		}
	}

	type sub struct {
		id, scenario string
		f            *follower
	}
	var turns []sub
	for round := range 2 {
		for _, sc := range replay.Names() {
			id := fmt.Sprintf("cl-%s-%d", sc, round)
			turns = append(turns, sub{id: id, scenario: sc, f: c.follow(id)})
		}
	}
	for _, tr := range turns {
		c.submit(tr.id, tr.scenario)
	}
	ran := map[string]int{}
	for _, tr := range turns {
		done := tr.f.completed(turnTimeout)
		c.checkTranscript(tr.id, tr.scenario, done)
		ran[instance(tr.f.of(events.TypeTurnCompleted)[0])]++
	}
	t.Logf("turns completed per turn replica: %v", ran)
	var ids []string
	for _, tr := range turns {
		ids = append(ids, tr.id)
	}
	c.requireHistory(ids)
}

// The turn replica running a turn is killed while the turn's tool runs;
// the other replica resumes the turn from its checkpoint and completes it;
// the tool call that was running is not run again.
func TestTurnReplicaCrash(t *testing.T) {
	t.Parallel()
	c := startCluster(t, clusterOpts{slow: "fixed_version=10s", turnAckWait: 4 * time.Second})
	const id = "crash-1"
	f := c.follow(id)
	c.submit(id, "anthropic")
	owner := instance(f.wait(time.Minute, events.TypeTurnStarted))
	f.wait(time.Minute, events.TypeToolStarted)
	// The call is on toolexec when its slow execution has started.
	c.eventually(time.Minute, "slow call started on toolexec", func() (bool, string) {
		s := c.slowStarts()
		return len(s["toolexec-1"])+len(s["toolexec-2"]) == 1, fmt.Sprint(s)
	})
	if f.of(events.TypeToolResult) != nil {
		t.Fatal("the tool finished before the crash; the test needs a slower tool")
	}
	c.kill(owner)
	killed := time.Now()

	done := f.completed(turnTimeout)
	t.Logf("turn completed %s after the crash of %s", time.Since(killed).Round(time.Millisecond), owner)
	callIDs := c.checkTranscript(id, "anthropic", done)
	c.requireHistory([]string{id})

	survivor := map[string]string{"turn-1": "turn-2", "turn-2": "turn-1"}[owner]
	if got := instance(f.of(events.TypeTurnCompleted)[0]); got != survivor {
		t.Errorf("completed by %s, want the surviving replica %s", got, survivor)
	}
	if st := c.state(id); st.Owner != survivor {
		t.Errorf("checkpoint owner %q, want %s", st.Owner, survivor)
	}
	// One execution per call across both toolexec replicas: the resumed
	// turn took the result of the call that was running, it did not call
	// the tool again.
	starts := c.slowStarts()
	all := append(slices.Clone(starts["toolexec-1"]), starts["toolexec-2"]...)
	for _, cid := range callIDs {
		if n := count(all, cid); n != 1 {
			t.Errorf("call %s executed %d times, want 1 (executions %v)", cid, n, starts)
		}
	}
	if len(all) != len(callIDs) {
		t.Errorf("tool executions %v, want one per call %v", starts, callIDs)
	}
	// A UI sees one result per call.
	for _, cid := range callIDs {
		n := 0
		for _, e := range f.of(events.TypeToolResult) {
			r, err := events.DecodeData[events.ToolCallResult](e)
			if err == nil && r.CallID == cid {
				n++
			}
		}
		if n != 1 {
			t.Errorf("%d llmw.tool.result events for call %s, want 1; events [%s]", n, cid, f.types())
		}
	}
}

// The toolexec replica running a call is cut off the network mid-call;
// after AckWait the call is redelivered to the other replica; there is one
// result per call id and the turn completes. Reconnecting the cut-off
// replica (whose run of the call finished meanwhile) adds no result.
func TestToolexecPartition(t *testing.T) {
	t.Parallel()
	c := startCluster(t, clusterOpts{slow: "fixed_version=8s", toolAckWait: 3 * time.Second})
	const id = "part-1"
	f := c.follow(id)
	c.submit(id, "anthropic")
	var holder string
	c.eventually(time.Minute, "slow call started on toolexec", func() (bool, string) {
		s := c.slowStarts()
		for name, ids := range s {
			if len(ids) == 1 {
				holder = name
				return true, ""
			}
		}
		return false, fmt.Sprint(s)
	})
	other := map[string]string{"toolexec-1": "toolexec-2", "toolexec-2": "toolexec-1"}[holder]
	c.disconnect(holder)
	cut := time.Now()

	done := f.completed(turnTimeout)
	t.Logf("turn completed %s after %s was cut off", time.Since(cut).Round(time.Millisecond), holder)
	callIDs := c.checkTranscript(id, "anthropic", done)
	if len(callIDs) != 1 {
		t.Fatalf("calls %v, want the scenario's one call", callIDs)
	}
	cid := callIDs[0]
	starts := c.slowStarts()
	if recs := c.logRecords(other, "slow tool start"); len(recs) > 0 {
		at, _ := time.Parse(time.RFC3339Nano, fmt.Sprint(recs[0]["time"]))
		t.Logf("call redelivered to %s %s after the cut (AckWait 3s)", other, at.Sub(cut).Round(time.Millisecond))
	}
	if count(starts[holder], cid) != 1 || count(starts[other], cid) != 1 {
		t.Errorf("executions %v: want the call once on %s (cut off) and once on %s (redelivered)", starts, holder, other)
	}
	if src := c.resultSource(id, cid); src != events.Source("toolexec", other) {
		t.Errorf("stored result from %q, want %s", src, events.Source("toolexec", other))
	}

	// Back on the network, the cut-off replica's own run of the call is
	// over and whatever it publishes is a duplicate.
	c.eventually(time.Minute, holder+" finished its run", func() (bool, string) {
		recs := c.logRecords(holder, "slow tool done")
		return len(recs) == 1, fmt.Sprintf("%d done records", len(recs))
	})
	c.reconnect(holder)
	c.eventually(2*time.Minute, holder+" answers on NATS again", func() (bool, string) {
		ids, err := c.pingInstances("llmw-toolexec")
		return slices.Contains(ids, holder), fmt.Sprint(ids, err)
	})
	t.Logf("%s answers again at +%s", holder, time.Since(c.start).Round(time.Millisecond))
	if got := c.toolResults(id); len(got) != 1 || got[cid] != 1 {
		t.Errorf("after the reconnect LLMW_TOOLRESULTS holds %v, want one result for %s", got, cid)
	}
	if c.state(id).Status != "completed" {
		t.Errorf("checkpoint changed after the reconnect: %+v", c.state(id))
	}
}

// The node leading LLMW_TURNS is killed; turns submitted afterwards still
// complete on the remaining two nodes (R3 streams keep their quorum).
func TestNATSNodeLoss(t *testing.T) {
	t.Parallel()
	c := startCluster(t, clusterOpts{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, err := c.js.Stream(ctx, events.StreamTurns)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx)
	if err != nil || info.Cluster == nil || info.Cluster.Leader == "" {
		t.Fatalf("LLMW_TURNS cluster info %+v, %v", info, err)
	}
	lost := info.Cluster.Leader
	c.kill(lost)
	killed := time.Now()

	// Submitted at once, while the streams elect new leaders: the client
	// retries what gets no answer, as any client must.
	type sub struct {
		id, scenario string
		f            *follower
	}
	var turns []sub
	for _, sc := range replay.Names() {
		id := "loss-" + sc
		turns = append(turns, sub{id: id, scenario: sc, f: c.follow(id)})
	}
	for _, tr := range turns {
		c.submit(tr.id, tr.scenario)
	}
	var ids []string
	for _, tr := range turns {
		c.checkTranscript(tr.id, tr.scenario, tr.f.completed(turnTimeout))
		ids = append(ids, tr.id)
	}
	t.Logf("%d turns completed %s after node %s was lost", len(turns), time.Since(killed).Round(time.Millisecond), lost)
	c.requireHistory(ids)
	c.retry("LLMW_TURNS info", func(ctx context.Context) error {
		info, err = st.Info(ctx)
		return err
	})
	if info.Cluster.Leader == lost || info.Config.Replicas != replicas {
		t.Errorf("LLMW_TURNS after the loss of %s: leader %s, replicas %d", lost, info.Cluster.Leader, info.Config.Replicas)
	}
}

func count(ids []string, id string) int {
	n := 0
	for _, x := range ids {
		if x == id {
			n++
		}
	}
	return n
}

// resultSource is the CloudEvents source of the result LLMW_TOOLRESULTS
// stores for a call: which toolexec replica published it.
func (c *cluster) resultSource(turnID, callID string) string {
	c.t.Helper()
	var m *jetstream.RawStreamMsg
	c.retry("result of "+callID, func(ctx context.Context) error {
		st, err := c.js.Stream(ctx, events.StreamToolResults)
		if err != nil {
			return err
		}
		m, err = st.GetLastMsgForSubject(ctx, c.subj.ToolResult(turnID, callID))
		return err
	})
	env, err := events.DecodeEnvelope(m.Header, m.Data)
	if err != nil {
		c.t.Fatal(err)
	}
	return env.Source
}

// pingInstances asks every instance of a micro service for a PING and
// returns the instance names in the replies' metadata, collected for one
// second.
func (c *cluster) pingInstances(service string) ([]string, error) {
	inbox := nats.NewInbox()
	sub, err := c.nc.SubscribeSync(inbox)
	if err != nil {
		return nil, err
	}
	defer sub.Unsubscribe()
	if err := c.nc.PublishRequest("$SRV.PING."+service, inbox, nil); err != nil {
		return nil, err
	}
	var out []string
	deadline := time.Now().Add(time.Second)
	for {
		m, err := sub.NextMsg(time.Until(deadline))
		if err != nil {
			break
		}
		var r struct {
			Metadata map[string]string `json:"metadata"`
		}
		if json.Unmarshal(m.Data, &r) == nil {
			out = append(out, r.Metadata["instance"])
		}
	}
	slices.Sort(out)
	return out, nil
}
