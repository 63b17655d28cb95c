package ingest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/ingest"
	"github.com/llmworker/llmworker/pkg/llm"
	"github.com/llmworker/llmworker/pkg/natstest"
)

// A client asks ingest for a completion and reads the stream. The provider
// here is a stand-in that always answers "Hello!".
func Example() {
	srv, err := natstest.New(natstest.Options{}) // or nats.Connect(yourServerURL)
	if err != nil {
		panic(err)
	}
	defer srv.Close()
	nc := srv.NC

	hello := llm.ProviderFunc(func(ctx context.Context, req *llm.Request) (llm.Stream, error) {
		return llm.SliceStream(
			events.BlockStart{Index: 0, BlockType: events.BlockText},
			events.TextDelta(0, "Hello!"),
			events.BlockStop{Index: 0, BlockType: events.BlockText, StopReason: events.StopEndTurn},
		), nil
	})
	svc, err := ingest.New(nc, ingest.Config{
		Instance:  "example",
		Providers: map[string]ingest.Factory{"demo": ingest.Static(hello)},
		Logger:    slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		panic(err)
	}
	if err := svc.Start(context.Background()); err != nil {
		panic(err)
	}
	defer svc.Stop(context.Background())

	// Subscribe to the stream first, then send the request.
	sub, _ := nc.SubscribeSync("llmw.llm.stream.r1")
	data, _ := json.Marshal(events.CompletionRequest{RequestID: "r1", Model: "demo:any",
		Messages: []events.Message{events.UserText("Hi")}})
	env, _ := events.NewEnvelope("/example/client", events.TypeLLMComplete, data)
	msg, err := nc.RequestMsg(&nats.Msg{Subject: "llmw.llm.complete", Header: nats.Header(env.BinaryHeader()), Data: data}, 5*time.Second)
	if err != nil {
		panic(err)
	}
	reply, err := ingest.DecodeReply(msg)
	fmt.Println("stream on", reply.StreamSubject, err)

	for {
		m, err := sub.NextMsg(5 * time.Second)
		if err != nil {
			panic(err)
		}
		env, _ := events.DecodeEnvelope(m.Header, m.Data)
		fmt.Println(env.Seq, env.Source, env.Type, string(env.Data))
		if ev, _ := events.DecodeStreamEvent(env.Type, env.Data); ev == (events.StatusEvent{Status: events.StatusCompleted}) {
			break
		}
	}

	// An unknown provider is refused, and says so.
	data, _ = json.Marshal(events.CompletionRequest{RequestID: "r2", Model: "nope:m", Messages: []events.Message{}})
	msg, _ = nc.RequestMsg(&nats.Msg{Subject: "llmw.llm.complete", Header: nats.Header(env.BinaryHeader()), Data: data}, 5*time.Second)
	_, err = ingest.DecodeReply(msg)
	fmt.Println(err)
	// Output:
	// stream on llmw.llm.stream.r1 <nil>
	// 1 /llmw/ingest/example llmw.llm.status {"status":"started"}
	// 2 /llmw/ingest/example llmw.llm.block.start {"index":0,"block_type":"text"}
	// 3 /llmw/ingest/example llmw.llm.block.delta {"index":0,"text":"Hello!"}
	// 4 /llmw/ingest/example llmw.llm.block.stop {"index":0,"block_type":"text","stop_reason":"end_turn"}
	// 5 /llmw/ingest/example llmw.llm.status {"status":"completed"}
	// ingest: 404 unknown_provider: unknown provider "nope" in model "nope:m" (configured: demo)
}
