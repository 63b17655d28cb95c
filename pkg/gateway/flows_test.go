package gateway_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/llmworker/llmworker/internal/replay"
	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/gateway"
	"github.com/llmworker/llmworker/pkg/llm"
	"github.com/llmworker/llmworker/pkg/llm/llmtest"
	"github.com/llmworker/llmworker/pkg/natstest"
)

// recordedAnswer is the reasoning and text of a one-step OpenAI
// Responses recording, read from the fixture bytes. The summary parts of
// the reasoning are joined by a blank line, as the adapter documents
// (pkg/provider/openairesponses/doc.go).
func recordedAnswer(t *testing.T, name string) (reasoning, answer string) {
	t.Helper()
	body := readFixture(t, name)
	for _, line := range strings.Split(body, "\n") {
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			continue
		}
		var ev struct {
			Type         string `json:"type"`
			Delta        string `json:"delta"`
			SummaryIndex int    `json:"summary_index"`
		}
		if json.Unmarshal([]byte(data), &ev) != nil {
			continue
		}
		switch ev.Type {
		case "response.reasoning_summary_part.added":
			if ev.SummaryIndex > 0 {
				reasoning += "\n\n"
			}
		case "response.reasoning_summary_text.delta":
			reasoning += ev.Delta
		case "response.output_text.delta":
			answer += ev.Delta
		}
	}
	return reasoning, answer
}

// A stream closed mid-turn (a page reload) leaves the turn running; a
// second gateway replica's resume replays the turn from its first event
// and goes on live: the same parts as the first stream up to where it
// stopped, then the rest, nothing lost or doubled.
func TestResumeOnAnotherReplica(t *testing.T) {
	st := startStack(t, stackOpts{pace: 3 * time.Millisecond})
	_, a := startGateway(t, st, gateway.Config{Model: "replay:openai-reasoning"})
	_, b := startGateway(t, st, gateway.Config{Model: "replay:openai-reasoning"})
	sc, _ := replay.Lookup("openai-reasoning")
	reasoning, answer := recordedAnswer(t, sc.Steps[0])

	ca, cb := &gateway.Client{URL: a.URL}, &gateway.Client{URL: b.URL}
	s, err := ca.Chat(ctxT(t), &gateway.ChatRequest{ID: "reload-1", Messages: []gateway.UIMessage{userMsg(sc.Prompt)}})
	if err != nil {
		t.Fatal(err)
	}
	first, done := readAll(t, s, func(ps []part) bool { return len(ps) >= 60 })
	s.Close()
	if done {
		t.Fatal("the turn ended before the reload: pace it slower")
	}

	r, err := cb.Resume(ctxT(t), "reload-1")
	if err != nil {
		t.Fatalf("resume on the second replica: %v", err)
	}
	all, done := readAll(t, r, nil)
	r.Close()
	if !done || all[len(all)-1].Type != "finish" {
		t.Fatalf("resumed stream did not finish: %v", types(all[max(0, len(all)-5):]))
	}
	for i := range first {
		if string(first[i].Raw) != string(all[i].Raw) {
			t.Fatalf("part %d differs after the reload:\n%s\n%s", i, first[i].Raw, all[i].Raw)
		}
	}
	if got := text(all, "reasoning-delta"); got != reasoning {
		t.Errorf("reasoning after resume: %d bytes, recorded %d", len(got), len(reasoning))
	}
	if got := text(all, "text-delta"); got != answer {
		t.Errorf("answer after resume %q, recorded %q", got, answer)
	}
	// Ended: no active stream any more.
	if _, err := cb.Resume(ctxT(t), "reload-1"); !errors.Is(err, gateway.ErrNoActiveStream) {
		t.Fatalf("resume after the end: %v, want 204", err)
	}
}

// Stop is not disconnect: the stop endpoint cancels the turn, whose
// stream then ends with the protocol's abort.
func TestStop(t *testing.T) {
	st := startStack(t, stackOpts{pace: 5 * time.Millisecond})
	_, srv := startGateway(t, st, gateway.Config{Model: "replay:openai-reasoning"})
	c := &gateway.Client{URL: srv.URL}
	s, err := c.Chat(ctxT(t), &gateway.ChatRequest{ID: "stop-1", Messages: []gateway.UIMessage{userMsg("How do I cross the street?")}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, done := readAll(t, s, func(ps []part) bool { return len(ps) >= 10 }); done {
		t.Fatal("ended early")
	}
	// A second message while the turn runs is refused, clearly.
	_, err = c.Chat(ctxT(t), &gateway.ChatRequest{ID: "stop-1", Messages: []gateway.UIMessage{userMsg("and?")}})
	var he *gateway.HTTPError
	if !errors.As(err, &he) || he.Status != http.StatusConflict || !strings.Contains(he.Message, "stop") {
		t.Fatalf("message during a turn: %v, want 409", err)
	}
	if err := c.Stop(ctxT(t), "stop-1"); err != nil {
		t.Fatal(err)
	}
	rest, done := readAll(t, s, nil)
	if !done || rest[len(rest)-1].Type != "abort" || !strings.Contains(rest[len(rest)-1].field("reason"), "cancel") {
		t.Fatalf("after stop: %v", types(rest[max(0, len(rest)-4):]))
	}
	if _, err := c.Resume(ctxT(t), "stop-1"); !errors.Is(err, gateway.ErrNoActiveStream) {
		t.Fatalf("resume after stop: %v, want 204", err)
	}
	if err := c.Stop(ctxT(t), "stop-1"); !errors.As(err, &he) || he.Status != http.StatusConflict {
		t.Fatalf("second stop: %v, want 409", err)
	}
}

// A turn paused by a hook ends its stream with the protocol's
// tool-approval-request; the client's answer in the next request (the
// assistant message's tool part in state approval-responded) resumes the
// turn, and the stream goes on from where it ended.
func TestApprovalRoundTrip(t *testing.T) {
	st := startStack(t, stackOpts{approve: "fixed_version"})
	_, srv := startGateway(t, st, gateway.Config{})
	sc, _ := replay.Lookup("anthropic")
	final := readRecorded(t, sc.Steps[len(sc.Steps)-1])
	for _, tc := range []struct {
		name     string
		approved bool
		input    string
		want     string // the part that settles the call
	}{
		{"approve", true, "", "tool-output-available"},
		// fixed_version takes no input: the edited input reaches the tool,
		// which refuses it.
		{"edit", true, `{"edited":true}`, "tool-output-error"},
		{"deny", false, "", "tool-output-denied"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &gateway.Client{URL: srv.URL}
			chat := "approve-" + tc.name
			s, err := c.Chat(ctxT(t), &gateway.ChatRequest{ID: chat, Messages: []gateway.UIMessage{userMsg(sc.Prompt)}})
			if err != nil {
				t.Fatal(err)
			}
			first, done := readAll(t, s, nil)
			s.Close()
			tps := types(first)
			ar := slices.Index(tps, "tool-approval-request")
			if !done || ar < 0 || tps[len(tps)-1] != "finish" || slices.Index(tps, "tool-input-available") > ar {
				t.Fatalf("paused stream: %v", tps)
			}
			req := first[ar]
			var call part
			for _, p := range first {
				if p.Type == "tool-input-available" {
					call = p
				}
			}
			if req.field("toolCallId") != call.field("toolCallId") || req.field("approvalId") == "" {
				t.Fatalf("approval request %s for call %s", req.Raw, call.Raw)
			}
			// A resume of the paused turn replays it to the same pause.
			if r, err := c.Resume(ctxT(t), chat); err != nil {
				t.Fatalf("resume of a paused turn: %v", err)
			} else {
				again, _ := readAll(t, r, nil)
				r.Close()
				if !slices.Equal(types(again), tps) {
					t.Fatalf("resumed paused turn %v, want %v", types(again), tps)
				}
			}
			// A new message while paused is refused.
			_, err = c.Chat(ctxT(t), &gateway.ChatRequest{ID: chat, Messages: []gateway.UIMessage{userMsg("hello?")}})
			var he *gateway.HTTPError
			if !errors.As(err, &he) || he.Status != http.StatusConflict {
				t.Fatalf("message to a paused turn: %v, want 409", err)
			}

			approved := tc.approved
			input := json.RawMessage(call.field("input"))
			if tc.input != "" {
				input = json.RawMessage(tc.input)
			}
			assistant := gateway.UIMessage{ID: first[0].field("messageId"), Role: "assistant", Parts: []gateway.UIPart{{
				Type: "tool-" + call.field("toolName"), ToolCallID: call.field("toolCallId"), State: "approval-responded",
				Input: input, Approval: &gateway.UIApproval{ID: req.field("approvalId"), Approved: &approved, Reason: "not now"},
			}}}
			s2, err := c.Chat(ctxT(t), &gateway.ChatRequest{ID: chat, Messages: []gateway.UIMessage{userMsg(sc.Prompt), assistant}})
			if err != nil {
				t.Fatal(err)
			}
			rest, done := readAll(t, s2, nil)
			s2.Close()
			rt := types(rest)
			if !done || rt[0] != "start" || rest[0].field("messageId") != first[0].field("messageId") || rt[len(rt)-1] != "finish" {
				t.Fatalf("continued stream: %v", rt)
			}
			// Nothing of the first stream again.
			for _, p := range rest {
				if slices.Contains([]string{"tool-input-start", "tool-input-available", "tool-approval-request", "reasoning-delta"}, p.Type) {
					t.Fatalf("the continued stream repeats %s: %v", p.Type, rt)
				}
			}
			settle := slices.IndexFunc(rest, func(p part) bool { return p.Type == tc.want && p.field("toolCallId") == call.field("toolCallId") })
			if settle < 0 {
				t.Fatalf("no %s for the call: %v", tc.want, rt)
			}
			if tc.name == "approve" {
				var want string
				for _, b := range final.blocks {
					want += b.text
				}
				if got := text(rest, "text-delta"); got != want {
					t.Errorf("answer %q, recorded %q", got, want)
				}
			}
			var resumed map[string]any
			for _, p := range rest {
				if p.Type == gateway.DataResumed {
					_ = json.Unmarshal([]byte(p.field("data")), &resumed)
				}
			}
			d, _ := json.Marshal(resumed["decisions"])
			wantDecision := map[string]string{"approve": `"approve"`, "edit": `{"input":{"edited":true}}`, "deny": `{"deny":"not now"}`}[tc.name]
			if !strings.Contains(string(d), wantDecision) {
				t.Errorf("decisions %s, want %s", d, wantDecision)
			}
		})
	}
}

// Access: with bearer tokens, a caller reads and writes only the
// sessions its token grants; another session's stream is refused, and
// unauthenticated requests get 401. Bad requests get JSON errors that
// name what is wrong.
func TestAccessAndErrors(t *testing.T) {
	st := startStack(t, stackOpts{})
	_, srv := startGateway(t, st, gateway.Config{
		Authorizer:   gateway.BearerTokens{"alice-token": "alice-", "bob-token": "bob-"},
		MaxBodyBytes: 4096,
	})
	alice := &gateway.Client{URL: srv.URL, Token: "alice-token"}
	bob := &gateway.Client{URL: srv.URL, Token: "bob-token"}
	s, err := alice.Chat(ctxT(t), &gateway.ChatRequest{ID: "alice-1", Messages: []gateway.UIMessage{userMsg("hi")}})
	if err != nil {
		t.Fatal(err)
	}
	first, _ := readAll(t, s, nil)
	s.Close()

	status := func(err error) int {
		var he *gateway.HTTPError
		if errors.As(err, &he) {
			return he.Status
		}
		return 0
	}
	if _, err := bob.Chat(ctxT(t), &gateway.ChatRequest{ID: "alice-1", Messages: []gateway.UIMessage{userMsg("mine now")}}); status(err) != 403 {
		t.Errorf("bob writes alice-1: %v, want 403", err)
	}
	if _, err := bob.Resume(ctxT(t), "alice-1"); status(err) != 403 {
		t.Errorf("bob resumes alice-1: %v, want 403", err)
	}
	if err := bob.Stop(ctxT(t), "alice-1"); status(err) != 403 {
		t.Errorf("bob stops alice-1: %v, want 403", err)
	}
	if _, err := bob.Messages(ctxT(t), "alice-1"); status(err) != 403 {
		t.Errorf("bob reads alice-1's messages: %v, want 403", err)
	}
	if msgs, err := alice.Messages(ctxT(t), "alice-1"); err != nil || len(msgs) != 2 || msgs[0].Parts[0].Text != "hi" {
		t.Errorf("alice reads alice-1's messages: %v %+v, want her question and the answer", err, msgs)
	}
	// Bob cannot read alice's turn under his own session either.
	get := func(path, token string) (*http.Response, string) {
		req, _ := http.NewRequestWithContext(ctxT(t), http.MethodGet, srv.URL+path, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp, readBody(t, resp)
	}
	turnID := first[0].field("messageId")
	if resp, body := get("/api/chat/bob-1/stream?turn="+turnID, "bob-token"); resp.StatusCode != 404 {
		t.Errorf("bob reads alice's turn as bob-1: %d %s, want 404", resp.StatusCode, body)
	}
	if resp, body := get("/api/chat/alice-1/stream?turn="+turnID, "alice-token"); resp.StatusCode != 200 || !strings.Contains(body, "[DONE]") {
		t.Errorf("alice reads her turn: %d", resp.StatusCode)
	}
	if resp, body := get("/api/chat/alice-1/stream", ""); resp.StatusCode != 401 || !strings.Contains(body, `"code":"unauthenticated"`) {
		t.Errorf("no token: %d %s", resp.StatusCode, body)
	}
	if resp, body := get("/api/sessions", "bob-token"); resp.StatusCode != 200 || strings.Contains(body, "alice-1") {
		t.Errorf("bob's session list: %d %s", resp.StatusCode, body)
	}
	if resp, body := get("/api/sessions", "alice-token"); resp.StatusCode != 200 || !strings.Contains(body, `"id":"alice-1"`) || !strings.Contains(body, turnID) {
		t.Errorf("alice's session list: %d %s", resp.StatusCode, body)
	}

	post := func(body string) (int, string) {
		req, _ := http.NewRequestWithContext(ctxT(t), http.MethodPost, srv.URL+"/api/chat", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer alice-token")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b := readBody(t, resp)
		if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
			t.Errorf("%.40s: error answer of type %q", body, ct)
		}
		return resp.StatusCode, b
	}
	for _, tc := range []struct {
		body   string
		status int
		want   string
	}{
		{`{`, 400, "not a chat request"},
		{``, 400, "empty body"},
		{`{"messages":[]}`, 400, "id: missing"},
		{`{"id":"alice.x","messages":[{"role":"user","parts":[{"type":"text","text":"hi"}]}]}`, 400, "id: must be"},
		{`{"id":"alice-2","messages":[]}`, 400, "messages: empty"},
		{`{"id":"alice-2","trigger":"regenerate-message","messages":[{"role":"user","parts":[{"type":"text","text":"hi"}]}]}`, 400, "regenerate-message"},
		{`{"id":"alice-2","messages":[{"role":"user","parts":[{"type":"file","url":"x"}]}]}`, 400, `file`},
		{`{"id":"alice-2","model":"openai:gpt-5","messages":[{"role":"user","parts":[{"type":"text","text":"hi"}]}]}`, 400, "model"},
		{`{"id":"alice-2","messages":[{"role":"user","parts":[{"type":"text","text":"` + strings.Repeat("x", 5000) + `"}]}]}`, 413, "too_large"},
		{`{"id":"alice-1","messages":[{"role":"assistant","parts":[{"type":"tool-x","toolCallId":"c","state":"approval-responded","approval":{"id":"a","approved":true}}]}]}`, 409, "no paused turn"},
	} {
		code, body := post(tc.body)
		if code != tc.status || !strings.Contains(body, tc.want) || !strings.Contains(body, `"error":{"code":`) {
			t.Errorf("%.60s: %d %s, want %d and %q", tc.body, code, body, tc.status, tc.want)
		}
	}
}

// Closing a gateway (a replica drains) ends its open streams without
// ending their turns: the client resumes on another replica, and the
// closed one refuses new requests with 503 before submitting anything.
func TestCloseLeavesTurnsRunning(t *testing.T) {
	st := startStack(t, stackOpts{pace: 3 * time.Millisecond})
	g, a := startGateway(t, st, gateway.Config{Model: "replay:openai-reasoning"})
	_, b := startGateway(t, st, gateway.Config{Model: "replay:openai-reasoning"})
	ca := &gateway.Client{URL: a.URL}
	s, err := ca.Chat(ctxT(t), &gateway.ChatRequest{ID: "drain-1", Messages: []gateway.UIMessage{userMsg("How do I cross the street?")}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, done := readAll(t, s, func(ps []part) bool { return len(ps) >= 10 }); done {
		t.Fatal("ended early")
	}
	g.Close()
	for {
		_, _, err := s.Next()
		if err != nil {
			if errors.Is(err, gateway.ErrStreamEnded) {
				t.Fatal("a closing gateway wrote [DONE]: the client would think the turn ended")
			}
			break
		}
	}
	var he *gateway.HTTPError
	if _, err := ca.Chat(ctxT(t), &gateway.ChatRequest{ID: "drain-2", Messages: []gateway.UIMessage{userMsg("hi")}}); !errors.As(err, &he) || he.Status != http.StatusServiceUnavailable {
		t.Fatalf("chat on a closed gateway: %v, want 503", err)
	}
	r, err := (&gateway.Client{URL: b.URL}).Resume(ctxT(t), "drain-1")
	if err != nil {
		t.Fatalf("resume on the other replica: %v", err)
	}
	all, done := readAll(t, r, nil)
	r.Close()
	if !done || all[len(all)-1].Type != "finish" {
		t.Fatalf("resumed: %v", types(all[max(0, len(all)-4):]))
	}
	// drain-2 was never submitted.
	if _, err := (&gateway.Client{URL: b.URL}).Resume(ctxT(t), "drain-2"); !errors.Is(err, gateway.ErrNoActiveStream) {
		t.Fatalf("drain-2: %v", err)
	}
}

// A replica of LLMW_EVENTS that is behind (here: since the middle of a
// turn) answers some of the direct gets, with the turn still running.
// The gateway's answers follow what the stream's leader has: after the
// turn ended, a resume finds no active stream, a stop finds no turn to
// stop, and the session's next message starts its next turn.
func TestLaggingReplicaIsNotBelieved(t *testing.T) {
	// The turn's second model call waits until the replica is made and
	// sealed, so that the replica holds the turn's middle and never its
	// end, however slowly the machine runs.
	release := make(chan struct{})
	held := llmtest.TextStep("Cross at the light.")
	held.OnCall = func(ctx context.Context, _ *llm.Request) error {
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	script := llmtest.NewScripted(
		llmtest.TextToolStep("Let me check the city.", llmtest.ToolCallSpec{ID: "call_cap", Name: "get_capital", Input: `{"country":"France"}`}),
		held,
		llmtest.TextStep("Then you are across."),
	)
	st := startStack(t, stackOpts{script: script})
	_, srv := startGateway(t, st, gateway.Config{Model: "script:lagging"})
	c := &gateway.Client{URL: srv.URL}
	const id = "lagging-1"
	s, err := c.Chat(ctxT(t), &gateway.ChatRequest{ID: id, Messages: []gateway.UIMessage{userMsg("How do I cross the street?")}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, done := readAll(t, s, func(ps []part) bool { return ps[len(ps)-1].Type == "tool-output-available" }); done {
		t.Fatal("the stream ended before the tool's result")
	}
	js, err := jetstream.New(st.NC)
	if err != nil {
		t.Fatal(err)
	}
	natstest.LaggingReplica(t, js, events.StreamEvents)
	close(release)
	if rest, done := readAll(t, s, nil); !done || rest[len(rest)-1].Type != "finish" {
		t.Fatalf("the turn did not finish: %v", types(rest[max(0, len(rest)-4):]))
	}
	evs, err := js.Stream(ctxT(t), events.StreamEvents)
	if err != nil {
		t.Fatal(err)
	}
	// Which member of the direct-get group answers first is up to the
	// machine's load: ask until the lagging one has answered once.
	stale := 0
	for i := 0; i < 400 && stale == 0; i++ {
		m, err := evs.GetLastMsgForSubject(ctxT(t), events.NewSubjects(st.Prefix).Events(id, "*", events.ChannelTurn))
		if err != nil {
			t.Fatal(err)
		}
		if m.Header.Get("ce-type") != events.TypeTurnCompleted {
			stale++
		}
	}
	if stale == 0 {
		t.Fatal("the lagging replica answered none of 400 direct gets: the test would prove nothing")
	}
	var he *gateway.HTTPError
	for i := range 8 {
		if _, err := c.Resume(ctxT(t), id); !errors.Is(err, gateway.ErrNoActiveStream) {
			t.Fatalf("resume %d after the end: %v, want 204", i, err)
		}
		if err := c.Stop(ctxT(t), id); !errors.As(err, &he) || he.Status != http.StatusConflict {
			t.Fatalf("stop %d after the end: %v, want 409", i, err)
		}
	}
	next, err := c.Chat(ctxT(t), &gateway.ChatRequest{ID: id, Messages: []gateway.UIMessage{userMsg("and then?")}})
	if err != nil {
		t.Fatalf("the session's next message: %v", err)
	}
	defer next.Close()
	if rest, done := readAll(t, next, nil); !done || rest[len(rest)-1].Type != "finish" {
		t.Fatalf("the next turn did not finish: %v", types(rest[max(0, len(rest)-4):]))
	}
}
