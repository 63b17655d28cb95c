// Package hookbridgesvc is hookbridge as cmd/hookbridge and `llmworker up`
// run it: the hooks of a YAML config file (pkg/hookbridge) served on NATS
// (pkg/hook/hooknats).
package hookbridgesvc

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/llmworker/llmworker/internal/service"
	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/hook/hooknats"
	"github.com/llmworker/llmworker/pkg/hookbridge"
)

// Options configure the service.
type Options struct {
	// Config is the hook config file (YAML); required.
	Config string
	// Check only checks the config and prints the hooks (a command's
	// --check).
	Check bool
	// Unregister removes the hooks from LLMW_HOOKS on shutdown.
	Unregister bool
	// Getenv reads the variables the config refers to (nil = os.Getenv).
	Getenv func(string) string
}

// Service is hookbridge.
type Service struct {
	Options
	file *hookbridge.File
	// Server is the hook server once started.
	Server *hooknats.Server
}

var (
	_ service.Service     = (*Service)(nil)
	_ service.Preflighter = (*Service)(nil)
)

func (*Service) Name() string { return "hookbridge" }

func (*Service) About() string {
	return `Serves the hooks of a YAML config file (built-in, command and HTTP hooks;
see deploy/hooks.example.yaml) as NATS request/reply responders and
registers them in KV LLMW_HOOKS, in the file's order. SIGINT or SIGTERM
drains: hook calls in flight finish.`
}

// Flags registers the service's flags.
func (s *Service) Flags(f *service.Flags) {
	f.String(&s.Config, "config", "LLMW_HOOKS_CONFIG", "", "hook config file (YAML)")
	f.Bool(&s.Check, "check", "", false, "check the config, print the hooks and exit")
	f.Bool(&s.Unregister, "unregister", "", false, "remove the hooks from LLMW_HOOKS on shutdown")
}

// Preflight loads the config; with Check it prints the hooks and says to
// exit.
func (s *Service) Preflight(stdout io.Writer) (bool, error) {
	if s.Config == "" {
		return false, errors.New("--config is required (or $LLMW_HOOKS_CONFIG)")
	}
	b, err := os.ReadFile(s.Config)
	if err != nil {
		return false, err
	}
	getenv := s.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	if s.file, err = hookbridge.ParseConfig(s.Config, b, hookbridge.ParseOptions{Getenv: getenv}); err != nil {
		return false, err
	}
	if !s.Check {
		return false, nil
	}
	for _, h := range s.file.Hooks {
		r := h.Registration
		fmt.Fprintf(stdout, "%s\t%s\tpriority=%d\tmatcher=%q\ttimeout_ms=%d\tfailure=%s\n",
			r.Name, r.Event, r.Priority, r.Matcher, r.TimeoutMS, cmp.Or(string(r.Failure), string(events.FailClosed)))
	}
	return true, nil
}

// Start serves the config's hooks.
func (s *Service) Start(ctx context.Context, env service.Env) (service.Stopper, error) {
	if s.file == nil {
		if _, err := s.Preflight(io.Discard); err != nil {
			return nil, err
		}
	}
	br, err := hooknats.NewServer(env.NC, hooknats.ServerConfig{
		Prefix: env.Prefix, Instance: env.Instance, Logger: env.Log, Hooks: s.file.Hooks, UnregisterOnStop: s.Unregister,
		Provision: env.Provision(),
	})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", service.ErrUsage, err)
	}
	if err := br.Start(ctx); err != nil {
		return nil, err
	}
	for _, h := range br.Hooks() {
		env.Log.Info("serving hook", "hook", h.Registration.Name, "event", h.Registration.Event, "subject", h.Registration.Subject)
	}
	s.Server = br
	return br, nil
}
