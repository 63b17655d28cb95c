package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"time"

	"go.temporal.io/sdk/client"
	tworker "go.temporal.io/sdk/worker"

	"github.com/llmworker/llmworker/pkg/events"
)

// The crash measurement: a child process runs the runtime's whole worker
// side (llmworker: ingest with the scripted model, toolexec with the echo
// tool and the turn service; Temporal: a worker with the workflow and the
// model and tool activities); this process runs only the server (NATS,
// Temporal's test server) and the client. The first child's fifth tool
// call tells this process and blocks; the child is killed (SIGKILL) and a
// second one started at once; the result is the time from the kill to the
// turn's completion on the second. Both runtimes get the same failover
// time, the time after which another process takes over work of a dead
// one: llmworker's AckWait of the turn and tool consumers; Temporal's
// activity StartToCloseTimeout, StickyScheduleToStartTimeout and
// WorkflowTaskTimeout (the server may hand the next workflow task to a
// poll of the dead worker that it has not noticed is gone), with retries
// at once (InitialInterval 1 ms) as JetStream redelivers.
const failover = 2 * time.Second

// crashCall is the input n of the tool call that the first child blocks
// in (the fifth step's).
const crashCall = 4

// gate is the first child's tool hook: it says "reached" on stdout and
// blocks until the process is killed.
func gate(n int) {
	if n == crashCall {
		fmt.Println("reached")
		select {}
	}
}

// child is a process running crash-child.
type child struct {
	cmd     *exec.Cmd
	ready   chan error
	reached chan struct{}
}

// startChild re-executes this binary as crash-child; the child exits when
// its stdin closes, so that none outlives this process.
func startChild(args ...string) (*child, error) {
	cmd := exec.Command(os.Args[0], append([]string{"crash-child"}, args...)...)
	cmd.Stderr = os.Stderr
	if _, err := cmd.StdinPipe(); err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	c := &child{cmd: cmd, ready: make(chan error, 1), reached: make(chan struct{})}
	go func() {
		sc := bufio.NewScanner(out)
		readied := false
		for sc.Scan() {
			switch line := strings.TrimSpace(sc.Text()); line {
			case "ready":
				readied = true
				c.ready <- nil
			case "reached":
				close(c.reached)
			}
		}
		if !readied {
			c.ready <- fmt.Errorf("child exited before it was ready")
		}
	}()
	return c, nil
}

func (c *child) waitReady() error {
	select {
	case err := <-c.ready:
		return err
	case <-time.After(time.Minute):
		return fmt.Errorf("child not ready within a minute")
	}
}

func (c *child) kill() {
	_ = c.cmd.Process.Kill()
	_ = c.cmd.Wait()
}

// crashChild runs the worker side of system until stdin closes; withGate
// blocks the crash call.
func crashChild(system, addr, namespace string, withGate bool) error {
	var before func(int)
	if withGate {
		before = gate
	}
	switch system {
	case "llmworker":
		stop, err := llmwServices{par: 1, storage: "memory", failover: failover, before: before}.start(addr)
		if err != nil {
			return err
		}
		defer stop()
	case "temporal":
		c, err := client.Dial(client.Options{HostPort: addr, Namespace: namespace, Logger: quietTemporal()})
		if err != nil {
			return err
		}
		defer c.Close()
		w := tworker.New(c, taskQueue, tworker.Options{StickyScheduleToStartTimeout: failover})
		registerWorkflow(w)
		registerActivities(w, before)
		if err := w.Start(); err != nil {
			return err
		}
		defer w.Stop()
	default:
		return fmt.Errorf("unknown system %q", system)
	}
	fmt.Println("ready")
	_, _ = io.Copy(io.Discard, os.Stdin)
	return nil
}

// crashOnce runs one crash measurement; start begins the turn and returns
// a wait for its completion.
func crashOnce(childArgs []string, start func() (wait func() error, err error)) (*result, error) {
	first, err := startChild(append(childArgs, "-gate")...)
	if err != nil {
		return nil, err
	}
	defer first.kill()
	if err := first.waitReady(); err != nil {
		return nil, err
	}
	wait, err := start()
	if err != nil {
		return nil, err
	}
	select {
	case <-first.reached:
	case <-time.After(time.Minute):
		return nil, fmt.Errorf("the turn never reached tool call %d", crashCall)
	}
	first.kill()
	t0 := time.Now()
	second, err := startChild(childArgs...)
	if err != nil {
		return nil, err
	}
	defer second.kill()
	if err := wait(); err != nil {
		return nil, err
	}
	return &result{CrashToDoneMs: ms(time.Since(t0))}, nil
}

func llmwCrash() (*result, error) {
	c, err := startLLMW(nil)
	if err != nil {
		return nil, err
	}
	defer c.close()
	return crashOnce([]string{"-system", "llmworker", "-addr", c.emb.URL()}, func() (func() error, error) {
		ch, err := c.submit("crash")
		if err != nil {
			return nil, err
		}
		return func() error {
			select {
			case typ := <-ch:
				if typ != events.TypeTurnCompleted {
					return fmt.Errorf("turn ended %s", typ)
				}
				return nil
			case <-time.After(time.Minute):
				return fmt.Errorf("the turn did not end within a minute of the crash")
			}
		}, nil
	})
}

func temporalCrash() (*result, error) {
	ts := startTemporal()
	defer ts.Stop()
	c := ts.GetDefaultClient()
	return crashOnce([]string{"-system", "temporal", "-addr", ts.GetFrontendHostPort(), "-namespace", ts.GetDefaultNamespace()}, func() (func() error, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "crash", TaskQueue: taskQueue, WorkflowTaskTimeout: failover}, "Agent", agentInput{Par: 1, ActivityTimeout: failover})
		if err != nil {
			cancel()
			return nil, err
		}
		return func() error {
			defer cancel()
			var text string
			if err := run.Get(ctx, &text); err != nil {
				return err
			}
			if text != "done" {
				return fmt.Errorf("workflow answered %q", text)
			}
			return nil
		}, nil
	})
}
