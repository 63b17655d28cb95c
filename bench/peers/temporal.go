package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	tlog "go.temporal.io/sdk/log"
	sdktemporal "go.temporal.io/sdk/temporal"
	tworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"go.temporal.io/server/temporaltest"
)

// The Temporal agent: the pattern of Temporal's OpenAI Agents and ADK
// integrations, a workflow whose model call and each tool call are
// activities (regular ones, or local ones run by the workflow worker).

type tCall struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	Args string `json:"args"`
}

type tMsg struct {
	Role   string  `json:"role"`
	Text   string  `json:"text,omitempty"`
	Calls  []tCall `json:"calls,omitempty"`
	CallID string  `json:"call_id,omitempty"`
}

type agentInput struct {
	Par   int  `json:"par"`
	Local bool `json:"local"`
	// ActivityTimeout is the StartToCloseTimeout of every activity
	// (0 = a minute).
	ActivityTimeout time.Duration `json:"activity_timeout"`
}

// temporalModel is the scripted model as an activity: the same script as
// scriptedModel, counting the tool results of its input.
func temporalModel(_ context.Context, par int, msgs []tMsg) (tMsg, error) {
	results := 0
	for _, m := range msgs {
		if m.Role == "tool" {
			results++
		}
	}
	step := results / par
	if step >= steps-1 {
		return tMsg{Role: "assistant", Text: "done"}, nil
	}
	out := tMsg{Role: "assistant", Calls: make([]tCall, par)}
	for i := range out.Calls {
		n := step*par + i
		out.Calls[i] = tCall{ID: "call_" + strconv.Itoa(n), Name: "echo", Args: `{"n":` + strconv.Itoa(n) + `}`}
	}
	return out, nil
}

// echoActivity decodes its JSON input as the typed tools of the other
// runtimes do; before, when set, runs first (crash measurement).
func echoActivity(before func(int)) func(context.Context, string) (string, error) {
	return func(_ context.Context, args string) (string, error) {
		var a echoArgs
		if err := json.Unmarshal([]byte(args), &a); err != nil {
			return "", err
		}
		if before != nil {
			before(a.N)
		}
		return strconv.Itoa(a.N), nil
	}
}

func agentWorkflow(ctx workflow.Context, in agentInput) (string, error) {
	timeout := in.ActivityTimeout
	if timeout <= 0 {
		timeout = time.Minute
	}
	var retry *sdktemporal.RetryPolicy // Temporal's default
	if in.ActivityTimeout > 0 {
		// The crash measurement: retry a timed-out activity at once, as
		// JetStream redelivers a call after its AckWait.
		retry = &sdktemporal.RetryPolicy{InitialInterval: time.Millisecond}
	}
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: timeout, RetryPolicy: retry})
	ctx = workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{StartToCloseTimeout: timeout, RetryPolicy: retry})
	exec := func(name string, args ...any) workflow.Future {
		if in.Local {
			return workflow.ExecuteLocalActivity(ctx, name, args...)
		}
		return workflow.ExecuteActivity(ctx, name, args...)
	}
	msgs := []tMsg{{Role: "user", Text: "go"}}
	for range 2 * steps {
		var out tMsg
		if err := exec("Model", in.Par, msgs).Get(ctx, &out); err != nil {
			return "", err
		}
		msgs = append(msgs, out)
		if len(out.Calls) == 0 {
			return out.Text, nil
		}
		fs := make([]workflow.Future, len(out.Calls))
		for i, c := range out.Calls {
			fs[i] = exec("Echo", c.Args)
		}
		for i, f := range fs {
			var r string
			if err := f.Get(ctx, &r); err != nil {
				return "", err
			}
			msgs = append(msgs, tMsg{Role: "tool", CallID: out.Calls[i].ID, Text: r})
		}
	}
	return "", fmt.Errorf("no answer after %d steps", 2*steps)
}

const taskQueue = "agent"

func registerActivities(r tworker.Registry, before func(int)) {
	r.RegisterActivityWithOptions(temporalModel, activity.RegisterOptions{Name: "Model"})
	r.RegisterActivityWithOptions(echoActivity(before), activity.RegisterOptions{Name: "Echo"})
}

func registerWorkflow(r tworker.Registry) {
	r.RegisterWorkflowWithOptions(agentWorkflow, workflow.RegisterOptions{Name: "Agent"})
}

func quietTemporal() tlog.Logger {
	return tlog.NewStructuredLogger(quiet())
}

// startTemporal starts Temporal's embedded test server (in-memory SQLite).
func startTemporal() *temporaltest.TestServer {
	return temporaltest.NewServer(temporaltest.WithBaseClientOptions(client.Options{Logger: quietTemporal()}))
}

func runAgent(c client.Client, id string, in agentInput) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: taskQueue}, "Agent", in)
	if err != nil {
		return err
	}
	var text string
	if err := run.Get(ctx, &text); err != nil {
		return err
	}
	if text != "done" {
		return fmt.Errorf("workflow %s answered %q", id, text)
	}
	return nil
}

// temporalDurable measures the agent on the embedded test server with
// its workers in this process: regular activities on a worker of their
// own (as llmworker's toolexec), or local activities in the workflow
// worker.
func temporalDurable(local bool, par int, o runOpts) (*result, error) {
	ts := startTemporal()
	defer ts.Stop()
	if local {
		ts.NewWorker(taskQueue, func(r tworker.Registry) {
			registerWorkflow(r)
			registerActivities(r, nil)
		})
	} else {
		// The activities on a worker of their own (Temporal's defaults: it
		// shares the workflow worker's client, so that the server hands an
		// activity over in its reply to the workflow task, eagerly). With
		// DisableEagerActivities every activity goes through the task
		// queue's matching instead, and a step takes seconds on this test
		// server.
		ts.NewWorker(taskQueue, registerWorkflow)
		ts.NewWorkerWithOptions(taskQueue, func(r tworker.Registry) { registerActivities(r, nil) }, tworker.Options{DisableWorkflowWorker: true})
	}
	c := ts.GetDefaultClient()
	i := 0
	in := agentInput{Par: par, Local: local}
	return measure(o, func() error {
		i++
		return runAgent(c, "wf-"+strconv.Itoa(i), in)
	})
}
