package toolexec_test

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/llmworker/llmworker/internal/leaf/jsread"
	"github.com/llmworker/llmworker/internal/leaf/natsutil"
	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/provision"
)

// BenchmarkToolRoundTripParts times, one at a time, the NATS operations a
// tool round trip is made of, with an fsync of every write (fsync=always,
// the default) and without (fsync=lazy): a core request/reply, a direct
// get that finds nothing (the stored-result lookups; and the same asked of
// the stream's leader, jsread.LastMsg), a JetStream publish
// to LLMW_TOOLRESULTS (the result's store), and a publish to
// LLMW_TOOLCALLS with the delivery to a standing pull and an acknowledged
// ack (the call's store and its removal from the work queue), and the same
// on a stream like it with limits retention, where an ack removes nothing
// (for comparison: it shows what the work queue's removal costs).
//
//	go test -run '^$' -bench ToolRoundTripParts ./pkg/toolexec/
func BenchmarkToolRoundTripParts(b *testing.B) {
	for _, lazy := range []bool{false, true} {
		mode := "fsync=always"
		o := natsutil.EmbeddedOptions{}
		if lazy {
			mode, o.SyncInterval = "fsync=lazy", 2*time.Minute
		}
		emb, err := natsutil.StartEmbedded(o)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(emb.Shutdown)
		nc, responder := connect(b, emb.URL()), connect(b, emb.URL())
		js, err := jetstream.New(nc)
		if err != nil {
			b.Fatal(err)
		}
		if err := provision.Provision(ctx(b), js, provision.Options{}); err != nil {
			b.Fatal(err)
		}
		if _, err := responder.Subscribe("bench.echo", func(m *nats.Msg) { _ = m.Respond(m.Data) }); err != nil {
			b.Fatal(err)
		}
		if err := responder.Flush(); err != nil {
			b.Fatal(err)
		}
		results, err := js.Stream(ctx(b), events.StreamToolResults)
		if err != nil {
			b.Fatal(err)
		}
		cons, err := js.CreateOrUpdateConsumer(ctx(b), events.StreamToolCalls, jetstream.ConsumerConfig{
			Durable: "tool_bench", AckPolicy: jetstream.AckExplicitPolicy, FilterSubject: "llmw.tool.call.bench"})
		if err != nil {
			b.Fatal(err)
		}
		it, err := cons.Messages(jetstream.PullMaxMessages(1))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(it.Stop)
		if _, err := js.CreateStream(ctx(b), jetstream.StreamConfig{Name: "BENCH_LIMITS", Subjects: []string{"bench.limits.>"},
			Retention: jetstream.LimitsPolicy, Storage: jetstream.FileStorage, Duplicates: provision.DefaultDuplicateWindow}); err != nil {
			b.Fatal(err)
		}
		lcons, err := js.CreateOrUpdateConsumer(ctx(b), "BENCH_LIMITS", jetstream.ConsumerConfig{
			Durable: "bench", AckPolicy: jetstream.AckExplicitPolicy, FilterSubject: "bench.limits.call"})
		if err != nil {
			b.Fatal(err)
		}
		lit, err := lcons.Messages(jetstream.PullMaxMessages(1))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(lit.Stop)
		c := context.Background()
		// i counts on across the runs of a sub-benchmark (-count, the
		// runs that size b.N): a message id used again is a duplicate,
		// which the stream acknowledges without storing or delivering it.
		i := 0
		run := func(name string, op func(i int) error) {
			b.Run(name+"/"+mode, func(b *testing.B) {
				lat := make([]time.Duration, 0, 1<<12)
				for b.Loop() {
					i++
					t0 := time.Now()
					if err := op(i); err != nil {
						b.Fatal(err)
					}
					lat = append(lat, time.Since(t0))
				}
				slices.Sort(lat)
				b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
			})
		}
		run("core-request", func(int) error {
			_, err := nc.Request("bench.echo", []byte("x"), 5*time.Second)
			return err
		})
		run("stored-result-miss", func(i int) error {
			_, err := results.GetLastMsgForSubject(c, "llmw.tool.result.bench.miss"+strconv.Itoa(i))
			if err == jetstream.ErrMsgNotFound {
				return nil
			}
			return err
		})
		run("stored-result-miss-leader", func(i int) error {
			_, err := jsread.LastMsg(c, nc, jetstream.DefaultAPIPrefix, events.StreamToolResults, "llmw.tool.result.bench.miss"+strconv.Itoa(i))
			if errors.Is(err, jetstream.ErrMsgNotFound) {
				return nil
			}
			return err
		})
		run("result-store", func(i int) error {
			id := mode + ".r" + strconv.Itoa(i)
			_, err := js.Publish(c, "llmw.tool.result.bench.r"+strconv.Itoa(i), []byte("x"), jetstream.WithMsgID(id))
			return err
		})
		storeDeliverAck := func(subject string, it jetstream.MessagesContext) func(int) error {
			return func(i int) error {
				if _, err := js.Publish(c, subject, []byte("x"), jetstream.WithMsgID(mode+".c"+strconv.Itoa(i))); err != nil {
					return err
				}
				m, err := it.Next()
				if err != nil {
					return err
				}
				return m.DoubleAck(c)
			}
		}
		run("call-store-deliver-ack", storeDeliverAck("llmw.tool.call.bench", it))
		run("limits-store-deliver-ack", storeDeliverAck("bench.limits.call", lit))
	}
}
