package a2a_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	spec "github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2aclient/agentcard"
	"github.com/a2aproject/a2a-go/v2/a2acompat/a2av0"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/llmworker/llmworker/pkg/a2a"
	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/gateway"
	"github.com/llmworker/llmworker/pkg/llm/llmtest"
	"github.com/llmworker/llmworker/pkg/natstest"
)

// The card of an agent names it, its description, its revision as the
// version, streaming and push notifications, and the JSON-RPC and REST interfaces of 1.0 and
// 0.3 at /a2a/NAME; the same JSON carries the 0.3 fields (url,
// protocolVersion, preferredTransport). An agent that does not exist has
// no card (404), nor does the root without a default agent.
func TestCard(t *testing.T) {
	st := startStack(t, stackOpts{script: llmtest.NewScripted()})
	rev := putAgent(t, st, events.AgentDefinition{Name: "helper", Description: "Answers questions about capitals.", Model: "script:helper", Tools: []string{"get_capital"}})
	_, card := client(t, st.GatewayURL, "helper")
	url := st.GatewayURL + a2a.PathPrefix + "helper"
	if card.Name != "helper" || card.Description != "Answers questions about capitals." || card.Version != strconv.FormatUint(rev, 10) {
		t.Errorf("card: name %q, description %q, version %q (revision %d)", card.Name, card.Description, card.Version, rev)
	}
	if !card.Capabilities.Streaming || !card.Capabilities.PushNotifications {
		t.Errorf("capabilities: %+v", card.Capabilities)
	}
	var ifaces []string
	for _, i := range card.SupportedInterfaces {
		if i.URL != url {
			t.Errorf("interface URL %q, want %q", i.URL, url)
		}
		ifaces = append(ifaces, string(i.ProtocolBinding)+" "+string(i.ProtocolVersion))
	}
	if want := []string{"JSONRPC 1.0", "HTTP+JSON 1.0", "JSONRPC 0.3", "HTTP+JSON 0.3"}; !slices.Equal(ifaces, want) {
		t.Errorf("interfaces %q, want %q", ifaces, want)
	}
	if !slices.Contains(card.DefaultInputModes, "image/png") || len(slices.Compact(slices.Sorted(slices.Values(card.DefaultInputModes)))) != len(card.DefaultInputModes) {
		t.Errorf("input modes: %q, want the media types once each", card.DefaultInputModes)
	}
	if len(card.Skills) != 1 || card.Skills[0].ID != "helper" {
		t.Errorf("skills: %+v", card.Skills)
	}

	resp, err := http.Get(url + "/.well-known/agent-card.json")
	if err != nil {
		t.Fatal(err)
	}
	var v03 struct {
		URL                string `json:"url"`
		ProtocolVersion    string `json:"protocolVersion"`
		PreferredTransport string `json:"preferredTransport"`
	}
	err = json.NewDecoder(resp.Body).Decode(&v03)
	resp.Body.Close()
	if err != nil || v03.URL != url || v03.ProtocolVersion != "0.3" || v03.PreferredTransport != "JSONRPC" {
		t.Errorf("0.3 fields of the card: %+v, %v", v03, err)
	}

	// With a default agent, the root card is its card.
	s, err := a2a.New(ctxT(t), st.NC, a2a.Config{Prefix: st.Prefix, DefaultAgent: "helper"})
	if err != nil {
		t.Fatal(err)
	}
	root := httptest.NewServer(s)
	defer func() {
		s.Close()
		root.Close()
	}()
	rootCard, err := agentcard.DefaultResolver.Resolve(ctxT(t), root.URL)
	if err != nil || rootCard.Name != "helper" || rootCard.SupportedInterfaces[0].URL != root.URL+"/a2a/helper" {
		t.Errorf("root card with a default agent: %+v, %v", rootCard, err)
	}

	for _, path := range []string{"/a2a/nobody/.well-known/agent-card.json", "/.well-known/agent-card.json"} {
		resp, err := http.Get(st.GatewayURL + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s: %d, want 404", path, resp.StatusCode)
		}
	}
}

// SendMessage (blocking) runs a turn of the agent: the task completes
// with the answer as an artifact; GetTask reads the same task from the
// turn's events, ListTasks lists it, also by its context.
func TestSendGetList(t *testing.T) {
	script := llmtest.NewScripted(llmtest.TextStep("Paris ", "is the capital."))
	st := startStack(t, stackOpts{script: script})
	c, _ := client(t, st.GatewayURL, "helper")
	ctx := ctxT(t)
	res, err := c.SendMessage(ctx, userText("Capital of France?"))
	if err != nil {
		t.Fatal(err)
	}
	task, ok := res.(*spec.Task)
	if !ok {
		t.Fatalf("result %T, want a task", res)
	}
	if task.Status.State != spec.TaskStateCompleted || artifactText(task) != "Paris is the capital." {
		t.Fatalf("task %s, answer %q", task.Status.State, artifactText(task))
	}
	if len(task.History) != 1 || task.History[0].Parts[0].Text() != "Capital of France?" {
		t.Errorf("history: %+v", task.History)
	}
	if !strings.HasPrefix(string(task.ID), "a2a-helper-") || task.ContextID == "" {
		t.Errorf("task id %q, context %q", task.ID, task.ContextID)
	}

	got, err := c.GetTask(ctx, &spec.GetTaskRequest{ID: task.ID})
	if err != nil {
		t.Fatal(err)
	}
	if got.Status.State != spec.TaskStateCompleted || artifactText(got) != "Paris is the capital." || got.ContextID != task.ContextID {
		t.Errorf("GetTask: %s %q", got.Status.State, artifactText(got))
	}

	// A second turn in the same context: the session's.
	script.Add(llmtest.TextStep("Berlin."))
	req := userText("And Germany?")
	req.Message.ContextID = task.ContextID
	res2, err := c.SendMessage(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	task2 := res2.(*spec.Task)
	if reqs := script.Requests(); len(reqs) != 2 || len(reqs[1].Messages) != 3 {
		t.Errorf("the second turn's model call: %d requests, the last with %d messages (want the session's 3)", len(reqs), len(reqs[len(reqs)-1].Messages))
	}

	list, err := c.ListTasks(ctx, &spec.ListTasksRequest{ContextID: task.ContextID})
	if err != nil {
		t.Fatal(err)
	}
	var ids []spec.TaskID
	for _, lt := range list.Tasks {
		ids = append(ids, lt.ID)
		if lt.Status.State != spec.TaskStateCompleted {
			t.Errorf("listed %s: %s", lt.ID, lt.Status.State)
		}
	}
	if list.TotalSize != 2 || !slices.Equal(ids, []spec.TaskID{task2.ID, task.ID}) {
		t.Errorf("ListTasks: total %d, ids %v, want [%s %s]", list.TotalSize, ids, task2.ID, task.ID)
	}
	page, err := c.ListTasks(ctx, &spec.ListTasksRequest{PageSize: 1, IncludeArtifacts: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Tasks) != 1 || page.NextPageToken == "" || artifactText(page.Tasks[0]) != "Berlin." {
		t.Errorf("first page of 1: %d tasks, next %q, answer %q", len(page.Tasks), page.NextPageToken, artifactText(page.Tasks[0]))
	}
}

// SendStreamingMessage over REST (the HTTP+JSON binding): the task first
// (submitted), working, the answer's chunks as artifact updates, and
// completed, the stream's last event.
func TestStreamREST(t *testing.T) {
	script := llmtest.NewScripted(llmtest.TextStep("Par", "is", "."))
	st := startStack(t, stackOpts{script: script})
	c, _ := client(t, st.GatewayURL, "helper", a2aclient.WithConfig(a2aclient.Config{PreferredTransports: []spec.TransportProtocol{spec.TransportProtocolHTTPJSON}}))
	var kinds []string
	var answer strings.Builder
	for ev, err := range c.SendStreamingMessage(ctxT(t), userText("Capital of France?")) {
		if err != nil {
			t.Fatal(err)
		}
		switch e := ev.(type) {
		case *spec.Task:
			kinds = append(kinds, "task:"+string(e.Status.State))
		case *spec.TaskStatusUpdateEvent:
			kinds = append(kinds, "status:"+string(e.Status.State))
		case *spec.TaskArtifactUpdateEvent:
			for _, p := range e.Artifact.Parts {
				answer.WriteString(p.Text())
			}
			if len(kinds) == 0 || kinds[len(kinds)-1] != "artifact" {
				kinds = append(kinds, "artifact")
			}
		}
	}
	want := []string{"task:TASK_STATE_SUBMITTED", "status:TASK_STATE_WORKING", "artifact", "status:TASK_STATE_COMPLETED"}
	if !slices.Equal(kinds, want) || answer.String() != "Paris." {
		t.Errorf("stream %q with %q, want %q with %q", kinds, answer.String(), want, "Paris.")
	}
}

// A call that needs approval makes the task input-required, its pending
// call in the status message; a message to the task with "approve"
// resumes the turn, which completes with the tool's result in its answer.
func TestInputRequiredThenResume(t *testing.T) {
	script := llmtest.NewScripted(
		llmtest.ToolStep(llmtest.ToolCallSpec{ID: "call_cap", Name: "get_capital", Input: `{"country":"France"}`}),
		llmtest.TextStep("It is Paris."),
	)
	st := startStack(t, stackOpts{script: script, approve: "get_capital"})
	c, _ := client(t, st.GatewayURL, "helper")
	ctx := ctxT(t)
	res, err := c.SendMessage(ctx, userText("Capital of France?"))
	if err != nil {
		t.Fatal(err)
	}
	task := res.(*spec.Task)
	if task.Status.State != spec.TaskStateInputRequired || task.Status.Message == nil {
		t.Fatalf("task %s, want input-required", task.Status.State)
	}
	b, _ := json.Marshal(task.Status.Message.Parts[len(task.Status.Message.Parts)-1].Data())
	if !strings.Contains(string(b), `"id":"call_cap"`) || !strings.Contains(string(b), `"name":"get_capital"`) {
		t.Errorf("pending calls: %s", b)
	}

	// A message that decides nothing is refused; the task still waits.
	bad := userText("maybe")
	bad.Message.TaskID = task.ID
	if _, err := c.SendMessage(ctx, bad); !errors.Is(err, spec.ErrInvalidParams) {
		t.Fatalf("an undecided answer: %v, want invalid params", err)
	}

	ok := userText("approve")
	ok.Message.TaskID, ok.Message.ContextID = task.ID, task.ContextID
	res, err = c.SendMessage(ctx, ok)
	if err != nil {
		t.Fatal(err)
	}
	done := res.(*spec.Task)
	if done.ID != task.ID || done.Status.State != spec.TaskStateCompleted || !strings.HasSuffix(artifactText(done), "It is Paris.") {
		t.Fatalf("after approve: %s %s %q", done.ID, done.Status.State, artifactText(done))
	}
	reqs := script.Requests()
	last := reqs[len(reqs)-1].Messages
	if tr := last[len(last)-1]; tr.Content[0].Type != events.PartToolResult || tr.Content[0].IsError {
		t.Errorf("the model's second call got %+v, want the tool's result", tr.Content[0])
	}
}

// CancelTask cancels a running turn: the answer is the canceled task; a
// second cancel is not possible.
func TestCancel(t *testing.T) {
	script := llmtest.NewScripted(llmtest.BlockingStep("Thinking"))
	st := startStack(t, stackOpts{script: script})
	c, _ := client(t, st.GatewayURL, "helper")
	ctx := ctxT(t)
	req := userText("Take your time.")
	req.Config = &spec.SendMessageConfig{ReturnImmediately: true}
	res, err := c.SendMessage(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	task := res.(*spec.Task)
	if task.Status.State != spec.TaskStateWorking {
		t.Fatalf("returnImmediately: %s, want working", task.Status.State)
	}
	natstest.Eventually(t, "the model call", func() bool { return script.Calls() == 1 })
	got, err := c.CancelTask(ctx, &spec.CancelTaskRequest{ID: task.ID})
	if err != nil {
		t.Fatal(err)
	}
	if got.Status.State != spec.TaskStateCanceled {
		t.Fatalf("after cancel: %s", got.Status.State)
	}
	if _, err := c.CancelTask(ctx, &spec.CancelTaskRequest{ID: task.ID}); !errors.Is(err, spec.ErrTaskNotCancelable) {
		t.Errorf("second cancel: %v, want task not cancelable", err)
	}
}

// A 0.3 client on the same URL: the JSON-RPC methods message/send and
// tasks/get as a 0.3 client posts them, and message/stream through
// a2a-go's 0.3 transport.
func TestProtocol03(t *testing.T) {
	script := llmtest.NewScripted(llmtest.TextStep("Paris."), llmtest.TextStep("Ber", "lin."))
	st := startStack(t, stackOpts{script: script})
	url := st.GatewayURL + a2a.PathPrefix + "helper"
	var send struct {
		Result struct {
			ID        string `json:"id"`
			Kind      string `json:"kind"`
			ContextID string `json:"contextId"`
			Status    struct {
				State string `json:"state"`
			} `json:"status"`
			Artifacts []struct {
				Parts []struct {
					Kind string `json:"kind"`
					Text string `json:"text"`
				} `json:"parts"`
			} `json:"artifacts"`
		} `json:"result"`
		Error *struct{ Code int } `json:"error"`
	}
	post(t, url, `{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"kind":"message","messageId":"m1","role":"user","parts":[{"kind":"text","text":"Capital of France?"}]}}}`, &send)
	r := send.Result
	if send.Error != nil || r.Kind != "task" || r.Status.State != "completed" || len(r.Artifacts) == 0 || r.Artifacts[0].Parts[0].Kind != "text" || r.Artifacts[0].Parts[0].Text != "Paris." {
		t.Fatalf("message/send: %+v", send)
	}
	var get struct {
		Result struct {
			ID     string `json:"id"`
			Status struct {
				State string `json:"state"`
			} `json:"status"`
		} `json:"result"`
	}
	post(t, url, `{"jsonrpc":"2.0","id":2,"method":"tasks/get","params":{"id":"`+r.ID+`"}}`, &get)
	if get.Result.ID != r.ID || get.Result.Status.State != "completed" {
		t.Errorf("tasks/get: %+v", get)
	}

	c, err := a2aclient.NewFromEndpoints(ctxT(t), []*spec.AgentInterface{{URL: url, ProtocolBinding: spec.TransportProtocolJSONRPC, ProtocolVersion: a2av0.Version}},
		a2av0.WithJSONRPCTransport(a2av0.JSONRPCTransportConfig{}))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Destroy()
	var answer strings.Builder
	var final spec.TaskState
	for ev, err := range c.SendStreamingMessage(ctxT(t), userText("And Germany?")) {
		if err != nil {
			t.Fatal(err)
		}
		switch e := ev.(type) {
		case *spec.TaskArtifactUpdateEvent:
			for _, p := range e.Artifact.Parts {
				answer.WriteString(p.Text())
			}
		case *spec.TaskStatusUpdateEvent:
			final = e.Status.State
		}
	}
	if answer.String() != "Berlin." || final != spec.TaskStateCompleted {
		t.Errorf("message/stream: %q, %s", answer.String(), final)
	}

	// The 0.3 REST binding, through a2a-go's 0.3 REST transport.
	script.Add(llmtest.TextStep("Rome."))
	rc, err := a2aclient.NewFromEndpoints(ctxT(t), []*spec.AgentInterface{{URL: url, ProtocolBinding: spec.TransportProtocolHTTPJSON, ProtocolVersion: a2av0.Version}},
		a2av0.WithRESTTransport(a2av0.RESTTransportConfig{}))
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Destroy()
	res, err := rc.SendMessage(ctxT(t), userText("And Italy?"))
	if err != nil {
		t.Fatal(err)
	}
	task, ok := res.(*spec.Task)
	if !ok || task.Status.State != spec.TaskStateCompleted || artifactText(task) != "Rome." {
		t.Fatalf("0.3 REST send: %+v", res)
	}
	got, err := rc.GetTask(ctxT(t), &spec.GetTaskRequest{ID: task.ID})
	if err != nil || got.Status.State != spec.TaskStateCompleted {
		t.Errorf("0.3 REST get: %+v, %v", got, err)
	}
}

// post sends a JSON-RPC body and decodes the answer.
func post(t *testing.T, url, body string, v any) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
}

// Each bad request gets the A2A error the spec names, and no turn is
// submitted for any of them.
func TestBadInput(t *testing.T) {
	script := llmtest.NewScripted(llmtest.TextStep("Paris."))
	st := startStack(t, stackOpts{script: script})
	c, _ := client(t, st.GatewayURL, "helper")
	res, err := c.SendMessage(ctxT(t), userText("Capital of France?"))
	if err != nil {
		t.Fatal(err)
	}
	done := res.(*spec.Task)
	js, err := jetstream.New(st.NC)
	if err != nil {
		t.Fatal(err)
	}
	turns := func() uint64 {
		s, err := js.Stream(ctxT(t), events.StreamTurns)
		if err != nil {
			t.Fatal(err)
		}
		info, err := s.Info(ctxT(t))
		if err != nil {
			t.Fatal(err)
		}
		return info.State.LastSeq
	}
	before := turns()

	url := st.GatewayURL + a2a.PathPrefix + "helper"
	for _, c := range []struct {
		name, body string
		code       int
	}{
		{"malformed body", `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":`, -32700},
		{"unknown method", `{"jsonrpc":"2.0","id":1,"method":"SendMail","params":{}}`, -32601},
		{"unknown 0.3 method", `{"jsonrpc":"2.0","id":1,"method":"message/mail","params":{}}`, -32601},
		{"unknown task", `{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"a2a-helper-000000000000000000000X"}}`, -32001},
		{"task of no agent's", `{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"t-1"}}`, -32001},
		{"message to a finished task", `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m2","role":"ROLE_USER","taskId":"` + string(done.ID) + `","parts":[{"text":"approve"}]}}}`, -32004},
		{"cancel of a finished task", `{"jsonrpc":"2.0","id":1,"method":"CancelTask","params":{"id":"` + string(done.ID) + `"}}`, -32002},
		{"message without parts", `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m3","role":"ROLE_USER","parts":[]}}}`, -32602},
		{"unsupported media", `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m4","role":"ROLE_USER","parts":[{"raw":"AAEC","mediaType":"application/x-thing"}]}}}`, -32005},
		{"push config of no URL", `{"jsonrpc":"2.0","id":1,"method":"CreateTaskPushNotificationConfig","params":{"taskId":"` + string(done.ID) + `","url":"ftp://example.com/x"}}`, -32602},
		{"push config of an unknown task", `{"jsonrpc":"2.0","id":1,"method":"CreateTaskPushNotificationConfig","params":{"taskId":"a2a-helper-000000000000000000000X","url":"https://example.com/x"}}`, -32001},
	} {
		var resp struct {
			Error *struct {
				Code    int    `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		}
		post(t, url, c.body, &resp)
		if resp.Error == nil || resp.Error.Code != c.code {
			t.Errorf("%s: %+v, want code %d", c.name, resp.Error, c.code)
		}
	}
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m5","role":"ROLE_USER","parts":[{"text":"hi"}]}}}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(spec.SvcParamVersion, "2.0")
	vr, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var verr struct {
		Error *struct{ Code int } `json:"error"`
	}
	err = json.NewDecoder(vr.Body).Decode(&verr)
	vr.Body.Close()
	if err != nil || verr.Error == nil || verr.Error.Code != -32009 {
		t.Errorf("A2A-Version 2.0: %+v, %v, want code -32009", verr.Error, err)
	}
	resp, err := http.Post(st.GatewayURL+"/a2a/nobody", "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{}}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("an agent that does not exist: %d, want 404", resp.StatusCode)
	}
	if after := turns(); after != before {
		t.Errorf("the bad requests stored %d turn requests", after-before)
	}
	if script.Calls() != 1 {
		t.Errorf("the model was called %d times, want once", script.Calls())
	}
}

// A stream broken mid-turn and picked up with SubscribeToTask on another
// gateway replica: the task as stored so far, then the rest; the
// answer's chunks before the break are in the task, none after it is
// missing or doubled.
func TestSubscribeOnAnotherReplica(t *testing.T) {
	var chunks []string
	for i := range 40 {
		chunks = append(chunks, "c"+strconv.Itoa(i)+" ")
	}
	want := strings.Join(chunks, "")
	script := llmtest.NewScripted(llmtest.TextStep(chunks...).WithDelay(30 * time.Millisecond))
	st := startStack(t, stackOpts{script: script})
	ca, _ := client(t, st.GatewayURL, "helper")
	b := startReplica(t, st)
	cb, _ := client(t, b.URL, "helper")

	ctx, cancel := context.WithCancel(ctxT(t))
	var id spec.TaskID
	var first strings.Builder
	n := 0
	for ev, err := range ca.SendStreamingMessage(ctx, userText("Count.")) {
		if err != nil {
			t.Fatal(err)
		}
		switch e := ev.(type) {
		case *spec.Task:
			id = e.ID
		case *spec.TaskArtifactUpdateEvent:
			for _, p := range e.Artifact.Parts {
				first.WriteString(p.Text())
			}
			n++
		case *spec.TaskStatusUpdateEvent:
			if e.Status.State.Terminal() {
				t.Fatal("the turn ended before the break: slow the script")
			}
		}
		if n == 10 {
			break
		}
	}
	cancel()

	var rest strings.Builder
	var snapshot *spec.Task
	var final spec.TaskState
	for ev, err := range cb.SubscribeToTask(ctxT(t), &spec.SubscribeToTaskRequest{ID: id}) {
		if err != nil {
			t.Fatal(err)
		}
		switch e := ev.(type) {
		case *spec.Task:
			if snapshot != nil {
				t.Fatal("a second task in the stream")
			}
			snapshot = e
		case *spec.TaskArtifactUpdateEvent:
			if snapshot == nil {
				t.Fatal("an update before the task")
			}
			for _, p := range e.Artifact.Parts {
				rest.WriteString(p.Text())
			}
		case *spec.TaskStatusUpdateEvent:
			final = e.Status.State
		}
	}
	if snapshot == nil {
		t.Fatal("no task")
	}
	stored := artifactText(snapshot)
	if !strings.HasPrefix(stored, first.String()) {
		t.Errorf("the task as stored %q does not start with what the first stream got %q", stored, first.String())
	}
	if got := stored + rest.String(); got != want || final != spec.TaskStateCompleted {
		t.Errorf("after the break: %q + %q (%s), want %q", stored, rest.String(), final, want)
	}
	if rest.Len() == 0 {
		t.Error("the turn ended before the subscribe: slow the script")
	}
}

// With the gateway's bearer tokens, the card declares the bearer scheme;
// a call without a token is unauthenticated; a token's contexts start
// with its prefix, and another token's task is not found.
func TestTokens(t *testing.T) {
	script := llmtest.NewScripted(llmtest.TextStep("Paris."))
	st := startStack(t, stackOpts{script: script})
	s, err := a2a.New(ctxT(t), st.NC, a2a.Config{Prefix: st.Prefix, Authorizer: gateway.BearerTokens{
		"alice-token-0123456789": "alice-", "bob-token-0123456789ab": "bob-",
	}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s)
	defer func() {
		s.Close()
		srv.Close()
	}()
	c, card := clientOf(t, srv.URL, "helper", []agentcard.ResolveOption{agentcard.WithRequestHeader(spec.SvcParamVersion, "1.0")})
	if _, ok := card.SecuritySchemes["bearer"].(spec.HTTPAuthSecurityScheme); !ok || len(card.SecurityRequirements) != 1 {
		t.Errorf("card security: %+v %+v", card.SecuritySchemes, card.SecurityRequirements)
	}
	// The union card, read by a2a-go's parser of both forms.
	union, err := (&agentcard.Resolver{CardParser: a2av0.NewAgentCardParser()}).Resolve(ctxT(t), srv.URL+"/a2a/helper")
	if err != nil {
		t.Fatal(err)
	}
	if hs, ok := union.SecuritySchemes["bearer"].(spec.HTTPAuthSecurityScheme); !ok || hs.Scheme != "Bearer" {
		t.Errorf("union card security: %+v", union.SecuritySchemes)
	}
	as := func(tok string) context.Context {
		return a2aclient.AttachServiceParams(ctxT(t), a2aclient.ServiceParams{"Authorization": {"Bearer " + tok}})
	}
	if _, err := c.SendMessage(ctxT(t), userText("Capital of France?")); !errors.Is(err, spec.ErrUnauthenticated) {
		t.Fatalf("without a token: %v, want unauthenticated", err)
	}
	res, err := c.SendMessage(as("alice-token-0123456789"), userText("Capital of France?"))
	if err != nil {
		t.Fatal(err)
	}
	task := res.(*spec.Task)
	if !strings.HasPrefix(task.ContextID, "alice-") || task.Status.State != spec.TaskStateCompleted {
		t.Fatalf("alice's task: context %q, %s", task.ContextID, task.Status.State)
	}
	if _, err := c.GetTask(as("bob-token-0123456789ab"), &spec.GetTaskRequest{ID: task.ID}); !errors.Is(err, spec.ErrTaskNotFound) {
		t.Errorf("bob reads alice's task: %v, want task not found", err)
	}
	if _, err := c.CreateTaskPushConfig(as("bob-token-0123456789ab"), &spec.PushConfig{TaskID: task.ID, URL: "https://bob.example/hook"}); !errors.Is(err, spec.ErrTaskNotFound) {
		t.Errorf("bob sets a push config on alice's task: %v, want task not found", err)
	}
	list, err := c.ListTasks(as("bob-token-0123456789ab"), &spec.ListTasksRequest{})
	if err != nil || len(list.Tasks) != 0 {
		t.Errorf("bob's list: %v, %v", list, err)
	}
	req := userText("And Germany?")
	req.Message.ContextID = task.ContextID
	if _, err := c.SendMessage(as("bob-token-0123456789ab"), req); !errors.Is(err, spec.ErrUnauthorized) {
		t.Errorf("bob writes to alice's context: %v, want unauthorized", err)
	}
}

// Push notifications: a config set with the message gets the task's
// state changes (working, then completed) posted by a2a-go's sender,
// with its token; a post that fails is made again. Configs are read,
// listed and deleted per task.
func TestPush(t *testing.T) {
	saved := a2a.PushBackoff
	a2a.PushBackoff = []time.Duration{100 * time.Millisecond, 100 * time.Millisecond}
	t.Cleanup(func() { a2a.PushBackoff = saved })
	script := llmtest.NewScripted(llmtest.TextStep("Paris."))
	st := startStack(t, stackOpts{script: script})

	var mu sync.Mutex
	var got []*spec.TaskStatusUpdateEvent
	failed := false
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var sr spec.StreamResponse
		if err := json.NewDecoder(r.Body).Decode(&sr); err != nil || r.Header.Get("A2A-Notification-Token") != "tok-1" {
			t.Errorf("notification: %v, token %q", err, r.Header.Get("A2A-Notification-Token"))
		}
		mu.Lock()
		defer mu.Unlock()
		if !failed {
			failed = true // the first post fails: it is made again
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		if su, ok := sr.Event.(*spec.TaskStatusUpdateEvent); ok {
			got = append(got, su)
		}
	}))
	defer hook.Close()

	c, _ := client(t, st.GatewayURL, "helper")
	req := userText("Capital of France?")
	req.Config = &spec.SendMessageConfig{PushConfig: &spec.PushConfig{URL: hook.URL, Token: "tok-1"}}
	res, err := c.SendMessage(ctxT(t), req)
	if err != nil {
		t.Fatal(err)
	}
	task := res.(*spec.Task)
	want := []string{string(spec.TaskStateWorking), string(spec.TaskStateCompleted)}
	natstest.Eventually(t, "the notifications", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(got) >= 2
	})
	// A retried post comes after later ones: the status timestamps
	// order them.
	mu.Lock()
	slices.SortFunc(got, func(a, b *spec.TaskStatusUpdateEvent) int { return a.Status.Timestamp.Compare(*b.Status.Timestamp) })
	var states []string
	for _, su := range got {
		states = append(states, string(su.Status.State))
		if su.TaskID != task.ID {
			t.Errorf("a notification of task %s", su.TaskID)
		}
	}
	if !slices.Equal(states, want) {
		t.Errorf("notified %q, want %q", states, want)
	}
	mu.Unlock()

	list, err := c.ListTaskPushConfigs(ctxT(t), &spec.ListTaskPushConfigRequest{TaskID: task.ID})
	if err != nil || len(list) != 1 || list[0].URL != hook.URL || list[0].TaskID != task.ID || list[0].ID == "" {
		t.Fatalf("list: %+v, %v", list, err)
	}
	one, err := c.GetTaskPushConfig(ctxT(t), &spec.GetTaskPushConfigRequest{TaskID: task.ID, ID: list[0].ID})
	if err != nil || one.Token != "tok-1" {
		t.Errorf("get: %+v, %v", one, err)
	}
	second, err := c.CreateTaskPushConfig(ctxT(t), &spec.PushConfig{TaskID: task.ID, ID: "second", URL: "https://example.com/hook"})
	if err != nil || second.ID != "second" {
		t.Fatalf("create: %+v, %v", second, err)
	}
	if err := c.DeleteTaskPushConfig(ctxT(t), &spec.DeleteTaskPushConfigRequest{TaskID: task.ID, ID: list[0].ID}); err != nil {
		t.Fatal(err)
	}
	if list, err = c.ListTaskPushConfigs(ctxT(t), &spec.ListTaskPushConfigRequest{TaskID: task.ID}); err != nil || len(list) != 1 || list[0].ID != "second" {
		t.Errorf("after delete: %+v, %v", list, err)
	}
}

// The same over streams: the first stream ends at input-required; the
// approval's stream starts with the task and goes on to completed, with
// the answer's chunks.
func TestInputRequiredStream(t *testing.T) {
	script := llmtest.NewScripted(
		llmtest.ToolStep(llmtest.ToolCallSpec{ID: "call_cap", Name: "get_capital", Input: `{"country":"France"}`}),
		llmtest.TextStep("It is ", "Paris."),
	)
	st := startStack(t, stackOpts{script: script, approve: "get_capital"})
	c, _ := client(t, st.GatewayURL, "helper")
	collect := func(req *spec.SendMessageRequest) (first spec.Event, last spec.TaskState, answer string) {
		for ev, err := range c.SendStreamingMessage(ctxT(t), req) {
			if err != nil {
				t.Fatal(err)
			}
			if first == nil {
				first = ev
			}
			switch e := ev.(type) {
			case *spec.TaskStatusUpdateEvent:
				last = e.Status.State
			case *spec.TaskArtifactUpdateEvent:
				for _, p := range e.Artifact.Parts {
					answer += p.Text()
				}
			}
		}
		return first, last, answer
	}
	first, last, _ := collect(userText("Capital of France?"))
	task, ok := first.(*spec.Task)
	if !ok || last != spec.TaskStateInputRequired {
		t.Fatalf("first stream: %T first, %s last", first, last)
	}
	ok2 := userText("approve")
	ok2.Message.TaskID = task.ID
	first, last, answer := collect(ok2)
	if t2, ok := first.(*spec.Task); !ok || t2.ID != task.ID || last != spec.TaskStateCompleted || answer != "It is Paris." {
		t.Fatalf("approval's stream: %T first, %s last, answer %q", first, last, answer)
	}
}
