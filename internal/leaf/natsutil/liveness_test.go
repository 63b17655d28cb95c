package natsutil_test

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/llmworker/llmworker/internal/leaf/natsutil"
	"github.com/llmworker/llmworker/pkg/natstest"
)

// A service connected to a node that a partition cut off (its packets
// vanish, no reset closes the connection) moves to another node by its
// pings, well within the 20 s a tool host's catalog claims outlive a
// renewal that failed (toolexec's default CatalogTTL, 30 s, minus its
// renewal interval, 10 s): within 10 s, which leaves the rest for the
// bucket's leader election and the renewal's retry.
func TestLivenessLeavesACutOffServer(t *testing.T) {
	const within = 10 * time.Second
	const scheduling = time.Second // a loaded machine's late timers
	cut := natstest.Start(t, natstest.Options{})
	live := natstest.Start(t, natstest.Options{})
	proxy := natstest.StartProxy(t, cut.URL())
	moved := make(chan string, 1)
	opts := append(natsutil.Liveness(), nats.DontRandomize(), nats.MaxReconnects(-1),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			select {
			case moved <- nc.ConnectedUrl():
			default:
			}
		}))
	nc, err := nats.Connect(proxy.URL()+","+live.URL(), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	if got := nc.ConnectedUrl(); got != proxy.URL() {
		t.Fatalf("connected to %s, want the cut-off server's proxy %s first", got, proxy.URL())
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	proxy.Freeze()
	cutAt := time.Now()
	select {
	case url := <-moved:
		took := time.Since(cutAt)
		if url != live.URL() {
			t.Errorf("reconnected to %s, want %s", url, live.URL())
		}
		if took > within+scheduling {
			t.Errorf("moved to the live server %v after the cut, want within %v", took.Round(time.Millisecond), within)
		}
		t.Logf("moved %v after the cut", took.Round(time.Millisecond))
	case <-time.After(3 * within):
		t.Fatalf("still on the cut-off server %v after the cut, want a move within %v", 3*within, within)
	}
}
