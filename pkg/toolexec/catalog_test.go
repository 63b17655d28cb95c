package toolexec_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/llmworker/llmworker/internal/leaf/jsread"
	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/natstest"
	"github.com/llmworker/llmworker/pkg/tool"
	"github.com/llmworker/llmworker/pkg/toolexec"
)

func TestCatalogPutGetListWatch(t *testing.T) {
	e := natstest.Start(t, natstest.Options{Provision: true, FileStorage: true})
	c := natstest.Context(t)
	cat, err := toolexec.OpenCatalog(c, e.JS)
	if err != nil {
		t.Fatal(err)
	}
	a := events.ToolCatalogEntry{Name: "a", Description: "tool a", InputSchema: json.RawMessage(`{"type":"object"}`), TimeoutMS: 1500, Version: "2"}
	if err := cat.Put(c, a); err != nil {
		t.Fatal(err)
	}
	if err := cat.Put(c, events.ToolCatalogEntry{Name: "bad name"}); !errors.Is(err, events.ErrInvalid) {
		t.Errorf("invalid entry: %v", err)
	}
	got, err := cat.Get(c, "a")
	if err != nil || got.TimeoutMS != 1500 || got.Version != "2" || got.Description != "tool a" {
		t.Fatalf("Get = %+v, %v", got, err)
	}
	if _, err := cat.Get(c, "missing"); !errors.Is(err, toolexec.ErrNotFound) {
		t.Errorf("Get(missing) = %v, want ErrNotFound", err)
	}
	w, err := cat.Watch(c)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if es := w.Entries(); len(es) != 1 || es[0].Name != "a" {
		t.Fatalf("watch initial %v", es)
	}
	b := a
	b.Name = "b"
	if err := cat.Put(c, b); err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, "watch sees b", func() bool { _, ok := w.Get("b"); return ok })
	if err := cat.Delete(c, "a"); err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, "watch drops a", func() bool { _, ok := w.Get("a"); return !ok })
	list, err := cat.List(c)
	if err != nil || len(list) != 1 || list[0].Name != "b" {
		t.Errorf("List = %v, %v", list, err)
	}
	if err := cat.Claim(c, a, "host.1", time.Minute); !errors.Is(err, toolexec.ErrInvalidClaim) || !strings.Contains(err.Error(), "host.1") {
		t.Errorf("Claim with a host id of two tokens = %v, want ErrInvalidClaim naming it", err)
	}
	if err := cat.Claim(c, a, "h1", 10*time.Millisecond); !errors.Is(err, toolexec.ErrInvalidClaim) || !strings.Contains(err.Error(), "TTL") {
		t.Errorf("Claim with a TTL under a second = %v, want ErrInvalidClaim naming the TTL", err)
	}
}

func TestRemoteToolNeedsCallInfo(t *testing.T) {
	e := natstest.Start(t, natstest.Options{Provision: true, FileStorage: true})
	rt := toolexec.NewClient(e.NC, e.JS, toolexec.ClientOptions{}).Tool(events.ToolCatalogEntry{Name: "x", InputSchema: json.RawMessage(`{}`)})
	if _, err := rt.Execute(context.Background(), nil); !errors.Is(err, toolexec.ErrNoCallInfo) {
		t.Fatalf("err = %v, want ErrNoCallInfo", err)
	}
}

func TestRemoteToolTakesCallInfo(t *testing.T) {
	e := natstest.Start(t, natstest.Options{Provision: true, FileStorage: true})
	rt := toolexec.NewClient(e.NC, e.JS, toolexec.ClientOptions{}).Tool(events.ToolCatalogEntry{Name: "x", InputSchema: json.RawMessage(`{}`)})
	// With the call info the call is sent (and, nobody hosting
	// x, times out) instead of failing for lack of ids.
	c, cancel := context.WithTimeout(tool.WithCall(context.Background(), tool.CallInfo{TurnID: "t", CallID: "c"}), 100*time.Millisecond)
	defer cancel()
	if _, err := rt.Execute(c, nil); errors.Is(err, toolexec.ErrNoCallInfo) || err == nil {
		t.Fatalf("err = %v", err)
	}
}

// watchCatalog follows LLMW_TOOLS as the turn service does.
func watchCatalog(t *testing.T, js jetstream.JetStream) *toolexec.CatalogWatcher {
	t.Helper()
	cat, err := toolexec.OpenCatalog(ctx(t), js)
	if err != nil {
		t.Fatal(err)
	}
	w, err := cat.Watch(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Stop() })
	return w
}

// A host that disappears without Stop (its connection closed, as when the
// process is killed) stops holding its tool in the catalog: the tool stays
// listed while another host of it lives, and vanishes within CatalogTTL of
// the last host's disappearance.
func TestCatalogForgetsDeadHosts(t *testing.T) {
	e := start(t)
	const ttl = time.Second
	_, ncA := replica(t, e.url, toolexec.Config{Instance: "a", CatalogTTL: ttl}, echo(nil))
	_, ncB := replica(t, e.url, toolexec.Config{Instance: "b", CatalogTTL: ttl}, echo(nil))
	w := watchCatalog(t, e.js)
	if _, ok := w.Get("echo"); !ok {
		t.Fatal("echo not in the catalog while its hosts run")
	}

	ncA.Close()
	// b lives: echo stays listed for several TTLs after a is gone, through
	// every change of the catalog meanwhile.
	stays := time.After(3 * ttl)
	for waiting := true; waiting; {
		changed := w.Changed()
		if _, ok := w.Get("echo"); !ok {
			t.Fatal("echo left the catalog although host b still runs")
		}
		select {
		case <-changed:
		case <-stays:
			waiting = false
		}
	}

	ncB.Close()
	gone := time.Now()
	// The entry was refreshed at most TTL before b died; the server
	// expires TTLs with a granularity of about a second.
	natstest.EventuallyWithin(t, ttl+2*time.Second, "echo to leave the catalog", func() bool {
		_, ok := w.Get("echo")
		return !ok
	})
	t.Logf("echo left the catalog %v after its last host", time.Since(gone).Round(time.Millisecond))
}

// claims lists the host claims of a tool in LLMW_TOOLS (keys <tool>.<host>).
func claims(t *testing.T, js jetstream.JetStream, toolName string) []string {
	t.Helper()
	kv, err := js.KeyValue(ctx(t), events.BucketTools)
	if err != nil {
		t.Fatal(err)
	}
	kl, err := kv.ListKeysFiltered(ctx(t), toolName+".*")
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for k := range kl.Keys() {
		keys = append(keys, k)
	}
	return keys
}

// A host that stops cleanly withdraws its claim at once (well before the
// TTL) without taking the tool from a host that still runs it; the last
// host's Stop takes the tool out of the catalog at once.
func TestCatalogStopWithdrawsClaim(t *testing.T) {
	e := start(t)
	const ttl = time.Minute // expiry cannot be what removes anything here
	a, _ := replica(t, e.url, toolexec.Config{Instance: "a", CatalogTTL: ttl}, echo(nil))
	b, _ := replica(t, e.url, toolexec.Config{Instance: "b", CatalogTTL: ttl}, echo(nil))
	w := watchCatalog(t, e.js)
	if n := len(claims(t, e.js, "echo")); n != 2 {
		t.Fatalf("%d claims of echo, want one per host", n)
	}
	if err := a.Stop(ctx(t)); err != nil {
		t.Fatal(err)
	}
	if n := len(claims(t, e.js, "echo")); n != 1 {
		t.Fatalf("%d claims of echo after a stopped, want b's only", n)
	}
	if _, ok := w.Get("echo"); !ok {
		t.Fatal("echo left the catalog although host b still runs")
	}
	if err := b.Stop(ctx(t)); err != nil {
		t.Fatal(err)
	}
	natstest.EventuallyWithin(t, 2*time.Second, "echo to leave the catalog", func() bool {
		_, ok := w.Get("echo")
		return !ok
	})
	if n := len(claims(t, e.js, "echo")); n != 0 {
		t.Fatalf("%d claims of echo after both stopped", n)
	}
}

// A replica of LLMW_TOOLS that is behind does not keep a stopped host's
// tool listed: Release purges the entry at the revision the bucket's
// leader has (one a lagging replica gave would conflict, and the entry
// would stay for its TTL), and Put compares with the leader's value (a
// lagging replica's equal entry is not the stored one).
func TestCatalogWithALaggingReplica(t *testing.T) {
	e := start(t)
	cat, err := toolexec.OpenCatalog(ctx(t), e.js)
	if err != nil {
		t.Fatal(err)
	}
	entry := func(name string) events.ToolCatalogEntry {
		return events.ToolCatalogEntry{Name: name, Description: "A tool.", InputSchema: json.RawMessage(`{"type":"object"}`)}
	}
	const n = 5
	for i := range n {
		if err := cat.Claim(ctx(t), entry(fmt.Sprintf("t%d", i)), "h1", time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	if err := cat.Put(ctx(t), entry("kept")); err != nil {
		t.Fatal(err)
	}
	natstest.LaggingReplica(t, e.js, "KV_"+events.BucketTools)
	for i := range n {
		// The heartbeat: a new revision the lagging replica lacks.
		if err := cat.Claim(ctx(t), entry(fmt.Sprintf("t%d", i)), "h1", time.Minute); err != nil {
			t.Fatal(err)
		}
		if err := cat.Release(ctx(t), fmt.Sprintf("t%d", i), "h1"); err != nil {
			t.Fatal(err)
		}
	}
	if err := cat.Delete(ctx(t), "kept"); err != nil {
		t.Fatal(err)
	}
	if err := cat.Put(ctx(t), entry("kept")); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if _, _, err := jsread.KVLast(ctx(t), e.nc, jetstream.DefaultAPIPrefix, events.BucketTools, fmt.Sprintf("t%d", i)); !errors.Is(err, jetstream.ErrKeyNotFound) {
			t.Errorf("t%d: the entry of a tool whose only host released it is still stored (%v)", i, err)
		}
	}
	if _, _, err := jsread.KVLast(ctx(t), e.nc, jetstream.DefaultAPIPrefix, events.BucketTools, "kept"); err != nil {
		t.Errorf("the entry put again after its delete is not stored: %v", err)
	}
	// A tool registered since the replica fell behind is found (a turn
	// asks Get when its catalog watcher has not seen the tool yet, and
	// fails with an unknown tool when Get does not find it), and one
	// released since is not.
	if err := cat.Put(ctx(t), entry("new")); err != nil {
		t.Fatal(err)
	}
	for range 20 {
		if _, err := cat.Get(ctx(t), "new"); err != nil {
			t.Fatalf("Get of a tool put after the replica fell behind: %v", err)
		}
		if got, err := cat.Get(ctx(t), "t0"); !errors.Is(err, toolexec.ErrNotFound) {
			t.Fatalf("Get of a released tool = %+v, %v; want ErrNotFound", got, err)
		}
	}
}

// A bucket that answers no write for a while does not take a live host's
// tool out of the catalog: LLMW_TOOLS has no leader during the election
// that follows a node loss, and a node that goes and comes back makes two
// of them. Here the bucket's writes go, three times in a row for one second,
// to a subscriber that never answers, one second apart, each time across
// the instant one beat after the last (CatalogTTL/3): the host tries a
// renewal that got no answer again at once, in the gap that follows, so
// its entry never gets older than the TTL.
func TestCatalogClaimOutlivesUnansweredRenewals(t *testing.T) {
	s := natstest.Start(t, natstest.Options{Provision: true, FileStorage: true})
	const ttl = 6 * time.Second
	const beat = ttl / 3
	replica(t, s.URL(), toolexec.Config{Instance: "a", CatalogTTL: ttl}, echo(nil))
	api := jsread.APIPrefix(s.JS)
	revision := func() uint64 {
		_, rev, err := jsread.KVLast(ctx(t), s.NC, api, events.BucketTools, "echo")
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			return 0
		}
		if err != nil {
			t.Fatal(err)
		}
		return rev
	}
	first := revision()
	if first == 0 {
		t.Fatal("echo not in the catalog once its host started")
	}
	// The beats count from the host's last renewal.
	natstest.EventuallyWithin(t, 2*beat, "a renewal of echo's entry", func() bool { return revision() != first })
	renewed := time.Now()

	// While stalled, the account maps the bucket's subjects to one a
	// subscriber takes and never answers: a write waits for its
	// acknowledgement in vain, as it does when no leader takes it.
	acc := s.Embedded.Server.GlobalAccount()
	swallow, err := s.NC.Subscribe("stalled.>", func(*nats.Msg) {})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = swallow.Unsubscribe() })
	if err := s.NC.Flush(); err != nil {
		t.Fatal(err)
	}
	stalled := false
	stall := func(on bool) {
		if on == stalled {
			return
		}
		stalled = on
		if on {
			if err := acc.AddMapping("$KV."+events.BucketTools+".>", "stalled.>"); err != nil {
				t.Fatal(err)
			}
			return
		}
		acc.RemoveMapping("$KV." + events.BucketTools + ".>")
	}
	t.Cleanup(func() { stall(false) })
	// Stalled around 1, 2 and 3 beats after the renewal, for a second
	// each: a host that tries again only at its next beat never gets a
	// write through, and its entry expires after the third (one TTL).
	windows := [][2]time.Duration{
		{beat - 500*time.Millisecond, beat + 500*time.Millisecond},
		{2*beat - 500*time.Millisecond, 2*beat + 500*time.Millisecond},
		{3*beat - 500*time.Millisecond, 3*beat + 500*time.Millisecond},
	}
	end := renewed.Add(ttl + beat)
	for now := time.Now(); now.Before(end); now = time.Now() {
		on := false
		for _, w := range windows {
			if d := now.Sub(renewed); d >= w[0] && d < w[1] {
				on = true
			}
		}
		stall(on)
		if revision() == 0 {
			t.Fatalf("echo left the catalog %v after its last renewal before the stalls, although its host lives", now.Sub(renewed).Round(time.Millisecond))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A host whose server takes its renewals but gets no answer from the
// bucket (the node is cut off from its cluster's quorum, yet answers the
// connection's pings) moves to another server, where its renewal lands
// before the claims it renewed last expire.
func TestCatalogRenewalsUnansweredMoveToAnotherServer(t *testing.T) {
	stuck := natstest.Start(t, natstest.Options{Provision: true, FileStorage: true})
	live := natstest.Start(t, natstest.Options{Provision: true, FileStorage: true})
	const ttl = 6 * time.Second
	// Default pings (every 2 minutes): only the heartbeat can move it.
	nc, err := nats.Connect(stuck.URL()+","+live.URL(), nats.DontRandomize(), nats.MaxReconnects(-1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	srv, err := toolexec.New(nc, toolexec.Config{Instance: "a", CatalogTTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Register(echo(nil)); err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(ctx(t)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Stop(c)
	})
	revision := func(s *natstest.Server) uint64 {
		_, rev, err := jsread.KVLast(ctx(t), s.NC, jsread.APIPrefix(s.JS), events.BucketTools, "echo")
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			return 0
		}
		if err != nil {
			t.Fatal(err)
		}
		return rev
	}
	first := revision(stuck)
	if first == 0 {
		t.Fatal("echo not in the catalog once its host started")
	}
	if revision(live) != 0 {
		t.Fatal("echo in the other server's catalog before its host moved there")
	}
	natstest.EventuallyWithin(t, ttl, "a renewal of echo's entry", func() bool { return revision(stuck) != first })
	renewed := time.Now()
	// From the renewal on, the server maps the bucket's subjects to one
	// a subscriber takes and never answers: a write waits for its
	// acknowledgement in vain, as on a node without the bucket's leader.
	swallow, err := stuck.NC.Subscribe("stalled.>", func(*nats.Msg) {})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = swallow.Unsubscribe() })
	if err := stuck.NC.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := stuck.Embedded.Server.GlobalAccount().AddMapping("$KV."+events.BucketTools+".>", "stalled.>"); err != nil {
		t.Fatal(err)
	}
	natstest.EventuallyWithin(t, ttl, "echo's claim renewed on the other server", func() bool { return revision(live) != 0 })
	if took := time.Since(renewed); took >= ttl {
		t.Errorf("echo renewed on the other server %v after its last renewal, after its claims expired (TTL %v)", took.Round(time.Millisecond), ttl)
	}
	if got := nc.ConnectedUrl(); got != live.URL() {
		t.Errorf("host connected to %s, want %s", got, live.URL())
	}
}
