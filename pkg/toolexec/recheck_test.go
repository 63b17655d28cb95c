package toolexec_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/llmworker/llmworker/pkg/cenats"
	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/natstest"
	"github.com/llmworker/llmworker/pkg/toolexec"
)

// A result that LLMW_TOOLRESULTS stored but whose message never reached
// the waiting client (its connection was cut off from the server that
// routed it, a partitioned node) is found in the stream: the call ends
// with it instead of waiting for its deadline. The lost message is the
// stream's republish of the result (which the client waits for): the
// stream stops republishing after the client read its configuration.
func TestWaitingCallFindsAStoredResultWhoseMessageWasLost(t *testing.T) {
	e := start(t)
	for i, tc := range []struct {
		name    string
		recheck time.Duration
		found   bool
	}{{"recheck", 200 * time.Millisecond, true}, {"no recheck", -1, false}} {
		t.Run(tc.name, func(t *testing.T) {
			nc, err := nats.Connect(e.url)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(nc.Close)
			js, err := jetstream.New(nc)
			if err != nil {
				t.Fatal(err)
			}
			c := toolexec.NewClient(nc, js, toolexec.ClientOptions{Recheck: tc.recheck, ResultGrace: 100 * time.Millisecond})
			callID := "lost-" + tc.name[:2]
			done := make(chan error, 1)
			var res events.ToolCallResult
			go func() {
				var err error
				res, err = c.Call(context.Background(), events.ToolCallRequest{TurnID: "t1", CallID: callID, Name: "nobody_hosts_this", Input: json.RawMessage(`{}`)}, 2*time.Second)
				done <- err
			}()
			// The call is stored (nobody takes it) and the client waits.
			subj := events.NewSubjects("").ToolCall("nobody_hosts_this")
			natstest.Eventually(t, "the call stored", func() bool {
				st, err := js.Stream(ctx(t), events.StreamToolCalls)
				if err != nil {
					return false
				}
				info, err := st.Info(ctx(t), jetstream.WithSubjectFilter(subj))
				return err == nil && info.State.Subjects[subj] == uint64(i+1)
			})
			setRepublish(t, e, nil)
			t.Cleanup(func() {
				s := events.NewSubjects("")
				setRepublish(t, e, &jetstream.RePublish{Source: s.ToolResultAll(), Destination: s.ToolStoredAll()})
			})
			env, err := events.NewEnvelope(events.Source("toolexec", "elsewhere"), events.TypeToolResult,
				events.ToolCallResult{CallID: callID, TurnID: "t1", Name: "nobody_hosts_this", Content: "42"})
			if err != nil {
				t.Fatal(err)
			}
			env.Subject, env.TurnID = "t1", "t1"
			if _, err := js.PublishMsg(ctx(t), cenats.NewMsg(events.NewSubjects("").ToolResult("t1", callID), env)); err != nil {
				t.Fatal(err)
			}
			err = <-done
			if tc.found {
				if err != nil || res.Content != "42" {
					t.Fatalf("%+v %v, want the stored result", res, err)
				}
				return
			}
			if !errors.Is(err, toolexec.ErrToolDeadline) {
				t.Fatalf("%v: without rechecks the lost message leaves the call to its deadline", err)
			}
		})
	}
}
