package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"go.temporal.io/sdk/client"
	tworker "go.temporal.io/sdk/worker"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/provision"
	"github.com/llmworker/llmworker/pkg/turn"
)

// The crash measurement: the process running the turn (llmworker's turn
// service, Temporal's workflow worker) is killed (SIGKILL) while the
// turn's fifth tool call runs; a second process is started at once; the
// result is the time from the kill to the turn's completion on the second
// process. Everything else (the server, the model, the tool) runs in this
// process. Both runtimes wait the same failover time before another
// process takes the turn over: llmworker's AckWait of the turn consumer,
// Temporal's StickyScheduleToStartTimeout (the workflow's sticky queue on
// the dead worker).
const failover = 2 * time.Second

// killAt blocks the tool call with input n == crashCall until the turn's
// process has been killed.
const crashCall = 4

type crashGate struct {
	once   sync.Once
	reach  chan struct{}
	killed chan struct{}
}

func newCrashGate() *crashGate {
	return &crashGate{reach: make(chan struct{}), killed: make(chan struct{})}
}

func (g *crashGate) before(n int) {
	if n != crashCall {
		return
	}
	first := false
	g.once.Do(func() { first = true })
	if first {
		close(g.reach)
		<-g.killed
	}
}

// child is a process running crash-child.
type child struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	ready chan error
}

// startChild re-executes this binary as crash-child; the child exits when
// its stdin closes, so that none outlives this process.
func startChild(args ...string) (*child, error) {
	cmd := exec.Command(os.Args[0], append([]string{"crash-child"}, args...)...)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	c := &child{cmd: cmd, stdin: stdin, ready: make(chan error, 1)}
	go func() {
		line, err := bufio.NewReader(out).ReadString('\n')
		if err == nil && strings.TrimSpace(line) != "ready" {
			err = fmt.Errorf("child said %q", line)
		}
		c.ready <- err
		_, _ = io.Copy(io.Discard, out)
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

// crashChild runs the turn service (llmworker) or the workflow worker
// (Temporal) until stdin closes.
func crashChild(system, addr, namespace string) error {
	switch system {
	case "llmworker":
		nc, err := nats.Connect(addr)
		if err != nil {
			return err
		}
		defer nc.Close()
		s, err := turn.New(nc, turn.Config{Logger: quiet(), AckWait: failover, Provision: provision.Options{Memory: true}})
		if err != nil {
			return err
		}
		if err := s.Start(context.Background()); err != nil {
			return err
		}
	case "temporal":
		c, err := client.Dial(client.Options{HostPort: addr, Namespace: namespace, Logger: quietTemporal()})
		if err != nil {
			return err
		}
		defer c.Close()
		w := tworker.New(c, taskQueue, tworker.Options{StickyScheduleToStartTimeout: failover})
		registerWorkflow(w)
		if err := w.Start(); err != nil {
			return err
		}
	default:
		return fmt.Errorf("unknown system %q", system)
	}
	fmt.Println("ready")
	_, _ = io.Copy(io.Discard, os.Stdin)
	return nil
}

// crashOnce runs one crash measurement; start begins the turn and returns
// a wait for its completion.
func crashOnce(childArgs []string, g *crashGate, start func() (wait func() error, err error)) (*result, error) {
	first, err := startChild(childArgs...)
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
	case <-g.reach:
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
	close(g.killed)
	if err := wait(); err != nil {
		return nil, err
	}
	return &result{CrashToDoneMs: ms(time.Since(t0))}, nil
}

func llmwCrash() (*result, error) {
	g := newCrashGate()
	c, err := startLLMW("memory", 1, false, turn.Config{}, g.before)
	if err != nil {
		return nil, err
	}
	defer c.close()
	return crashOnce([]string{"-system", "llmworker", "-addr", c.emb.URL()}, g, func() (func() error, error) {
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
	g := newCrashGate()
	ts := startTemporal()
	defer ts.Stop()
	ts.NewWorkerWithOptions(taskQueue, func(r tworker.Registry) { registerActivities(r, g.before) }, tworker.Options{DisableWorkflowWorker: true})
	c := ts.GetDefaultClient()
	return crashOnce([]string{"-system", "temporal", "-addr", ts.GetFrontendHostPort(), "-namespace", ts.GetDefaultNamespace()}, g, func() (func() error, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "crash", TaskQueue: taskQueue}, "Agent", agentInput{Par: 1})
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
