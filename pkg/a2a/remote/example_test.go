package remote_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"

	spec "github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

	"github.com/llmworker/llmworker/pkg/a2a/remote"
)

// A remote agent (here an a2a-go server of its own) is opened from its
// card, sent a message with the caller's message id, and followed until
// its task ends.
func Example() {
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	defer srv.Close()
	card := &spec.AgentCard{Name: "echo", Version: "1", Capabilities: spec.AgentCapabilities{Streaming: true},
		SupportedInterfaces: []*spec.AgentInterface{spec.NewAgentInterface(srv.URL+"/a2a", spec.TransportProtocolJSONRPC)}}
	mux.Handle("/a2a", a2asrv.NewJSONRPCHandler(a2asrv.NewHandler(echo{})))
	mux.Handle(a2asrv.WellKnownAgentCardPath, a2asrv.NewStaticAgentCardHandler(card))

	ctx := context.Background()
	a, err := remote.Open(ctx, srv.URL, remote.Config{Token: remote.TokenFor("echo")})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer func() { _ = a.Close() }()
	task, err := a.Send(ctx, "turn-1", "hello")
	if err != nil {
		fmt.Println(err)
		return
	}
	done, err := a.Follow(ctx, task.ID, func(u remote.Update) error {
		if u.Artifact != nil {
			fmt.Printf("artifact chunk %q\n", u.Artifact.Text)
		}
		return nil
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(done.State, done.Answer())
	// Output:
	// artifact chunk "echo: hello"
	// completed echo: hello
}
