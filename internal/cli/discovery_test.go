package cli

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
	"github.com/nats-io/nuid"

	"github.com/llmworker/llmworker/internal/leaf/version"
	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/toolexec"
)

// srv sends a $SRV request and collects the replies of every service
// instance until want says it has them all (or 10 s pass).
func srv(t *testing.T, nc *nats.Conn, subject string, want func([]json.RawMessage) bool) []json.RawMessage {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		inbox := nc.NewRespInbox()
		sub, err := nc.SubscribeSync(inbox)
		if err != nil {
			t.Fatal(err)
		}
		if err := nc.PublishRequest(subject, inbox, nil); err != nil {
			t.Fatal(err)
		}
		var got []json.RawMessage
		for {
			m, err := sub.NextMsg(200 * time.Millisecond)
			if err != nil {
				break
			}
			got = append(got, m.Data)
		}
		_ = sub.Unsubscribe()
		if want(got) {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: replies %s", subject, got)
		}
	}
}

// TestServiceDiscovery: every service of a stack answers $SRV.INFO with
// llmworker's one version (the one `llmworker version` prints), and
// toolexec's STATS count the calls it ran from the queue.
func TestServiceDiscovery(t *testing.T) {
	st := startShared(t, 0)
	names := map[string]string{}
	srv(t, st.NC, "$SRV.INFO", func(replies []json.RawMessage) bool {
		for _, r := range replies {
			var info micro.Info
			if json.Unmarshal(r, &info) == nil {
				names[info.Name] = info.Version
			}
		}
		return len(names) >= 4
	})
	for _, n := range []string{"llmw-ingest", "llmw-toolexec", "llmw-turn", "llmw-hookbridge"} {
		if v, ok := names[n]; !ok || v != version.String() {
			t.Errorf("$SRV.INFO: %s version %q (found %v), want %q", n, v, ok, version.String())
		}
	}
	if r := runCLI(t, Env{}, "version"); !strings.Contains(r.stdout, version.String()) {
		t.Errorf("llmworker version = %q, want %s", r.stdout, version.String())
	}

	// A turn whose tool call runs from the queue shows in the tool's STATS.
	id := nuid.Next()
	submit(t, st, events.TurnRequest{TurnID: id, Model: "replay:anthropic"})
	waitFor(t, st, id, events.TypeTurnCompleted)
	srv(t, st.NC, "$SRV.STATS."+toolexec.ServiceName, func(replies []json.RawMessage) bool {
		for _, r := range replies {
			var stats micro.Stats
			if json.Unmarshal(r, &stats) != nil {
				continue
			}
			for _, ep := range stats.Endpoints {
				var q toolexec.QueueStats
				if ep.Name == "fixed_version" && json.Unmarshal(ep.Data, &q) == nil && q.Calls >= 1 {
					return true
				}
			}
		}
		return false
	})
}
