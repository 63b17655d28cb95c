// Package ingestsvc is the ingest service as cmd/ingest and `llmworker up`
// run it: the built-in providers of pkg/provider (and, with --replay, the
// recorded streams of internal/replay) behind pkg/ingest.
package ingestsvc

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/llmworker/llmworker/internal/replay"
	"github.com/llmworker/llmworker/internal/service"
	"github.com/llmworker/llmworker/pkg/ingest"
	"github.com/llmworker/llmworker/pkg/provider"
	"github.com/llmworker/llmworker/pkg/quota"
)

// Options configure the service. The zero value serves the built-in
// providers from the SDKs' environment variables.
type Options struct {
	// IdleTimeout ends a stream whose provider is silent this long (0 =
	// default, negative = never).
	IdleTimeout time.Duration
	// MaxPayload is the largest request body (0 = the server's max payload).
	MaxPayload int
	// Structured publishes structured-mode CloudEvents.
	Structured bool
	// Replay also serves the replay:<scenario> models.
	Replay bool
	// ReplayPace is the time replayed streams take per token (replay.Config.Pace;
	// 0 = as fast as possible; the flag defaults to replay.DefaultPace).
	ReplayPace time.Duration
	// Getenv reads the providers' variables (nil = os.Getenv).
	Getenv func(string) string
	// Quota holds model calls to the provider limits the replicas share
	// in LLMW_QUOTA (pkg/quota); QuotaConfig implies it.
	Quota bool
	// QuotaConfig is a limits file (YAML or JSON, quota.Parse), read
	// again when it changes; the bucket's config key wins while it exists.
	QuotaConfig string
	// QuotaReload is how often the limits file is checked for changes
	// (0 = DefaultQuotaReload).
	QuotaReload time.Duration
}

// DefaultQuotaReload is how often the limits file is checked for changes.
const DefaultQuotaReload = 5 * time.Second

// Service is the ingest service.
type Service struct {
	Options
	// ReplayServer is the replay server while the service runs with Replay.
	ReplayServer *replay.Server
}

var _ service.Service = (*Service)(nil)

func (*Service) Name() string { return "ingest" }

func (*Service) About() string {
	return `Runs llmw-ingest, the micro service that calls LLM providers through their
official SDKs and publishes their streams as CloudEvents on NATS.

Provider keys and base URLs come from the SDKs' own variables:
OPENAI_API_KEY, OPENAI_BASE_URL, ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL,
GEMINI_API_KEY / GOOGLE_API_KEY, GOOGLE_GEMINI_BASE_URL. A provider without
a key is still listed; its requests are refused with missing_api_key.
SIGINT or SIGTERM drains: running streams finish within --drain-timeout.`
}

// Flags registers the service's flags.
func (s *Service) Flags(f *service.Flags) {
	f.Duration(&s.IdleTimeout, "idle-timeout", "LLMW_IDLE_TIMEOUT", 0, "end a stream whose provider is silent this long (0 = 10m, negative = never)")
	f.Int(&s.MaxPayload, "max-payload", "LLMW_MAX_PAYLOAD", 0, "largest request body in bytes (0 = the server's max payload)")
	f.Bool(&s.Structured, "structured", "LLMW_STRUCTURED", false, "publish structured-mode CloudEvents instead of binary mode")
	f.Bool(&s.Replay, "replay", "LLMW_REPLAY", false, `also serve "replay:<scenario>" models: recorded provider streams played through the real adapters (no account, no network)`)
	f.Bool(&s.Quota, "quota", "LLMW_QUOTA_ENABLED", false, "hold model calls to the provider limits all replicas share in the LLMW_QUOTA bucket (its config key sets them)")
	f.String(&s.QuotaConfig, "quota-config", "LLMW_QUOTA_CONFIG", "", "file of provider limits (YAML or JSON; implies --quota), read again when it changes")
	f.Duration(&s.ReplayPace, "replay-pace", "LLMW_REPLAY_PACE", replay.DefaultPace, "replay: time per streamed token, so that a replay streams as a live model writes (0 = as fast as possible)")
}

// Start starts ingest.
func (s *Service) Start(ctx context.Context, env service.Env) (service.Stopper, error) {
	providers := provider.Builtin(provider.Config{IdleTimeout: s.IdleTimeout, Getenv: s.Getenv})
	if s.Replay {
		srv, err := replay.NewServer(replay.Config{Pace: s.ReplayPace})
		if err != nil {
			return nil, err
		}
		s.ReplayServer = srv
		providers[replay.Prefix] = srv.Factory()
		env.Log.Info("replay models enabled: "+replay.Label, "models", replayModels())
	}
	limiter, stopReload, err := s.startQuota(ctx, env)
	if err != nil {
		s.closeReplay()
		return nil, err
	}
	closeQuota := func() {
		stopReload()
		if limiter != nil {
			_ = limiter.Close()
		}
	}
	svc, err := ingest.New(env.NC, ingest.Config{
		Prefix: env.Prefix, Instance: env.Instance, Providers: providers, IdleTimeout: s.IdleTimeout,
		MaxPayload: s.MaxPayload, Logger: env.Log, Structured: s.Structured, Quota: limiter,
	})
	if err != nil {
		closeQuota()
		s.closeReplay()
		return nil, fmt.Errorf("%w: %w", service.ErrUsage, err)
	}
	err = svc.Start(ctx)
	if err != nil {
		closeQuota()
		s.closeReplay()
		return nil, err
	}
	return service.StopFunc(func(ctx context.Context) error {
		err := svc.Stop(ctx)
		closeQuota()
		s.closeReplay()
		return err
	}), nil
}

// startQuota opens the limiter when --quota or --quota-config asks for one
// and follows the limits file; stop ends the following.
func (s *Service) startQuota(ctx context.Context, env service.Env) (_ *quota.Limiter, stop func(), err error) {
	stop = func() {}
	if !s.Quota && s.QuotaConfig == "" {
		return nil, stop, nil
	}
	var lim quota.Limits
	var mod time.Time
	if s.QuotaConfig != "" {
		if lim, mod, err = readLimits(s.QuotaConfig); err != nil {
			return nil, stop, fmt.Errorf("%w: --quota-config: %w", service.ErrUsage, err)
		}
	}
	js, err := jetstream.New(env.NC)
	if err != nil {
		return nil, stop, err
	}
	l, err := quota.New(ctx, js, quota.Config{Replica: env.Instance, Limits: lim, Logger: env.Log})
	if err != nil {
		return nil, stop, fmt.Errorf("%w (llmworker provision makes it)", err)
	}
	if s.QuotaConfig == "" {
		return l, stop, nil
	}
	done := make(chan struct{})
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		every := s.QuotaReload
		if every <= 0 {
			every = DefaultQuotaReload
		}
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
			}
			fi, err := os.Stat(s.QuotaConfig)
			if err != nil || fi.ModTime().Equal(mod) {
				continue
			}
			lim, m, err := readLimits(s.QuotaConfig)
			if err == nil {
				err = l.SetLimits(lim)
			}
			if err != nil {
				env.Log.Error("quota: limits file not applied, the limits in force stay", "file", s.QuotaConfig, "err", err)
				continue
			}
			mod = m
			env.Log.Info("quota: limits file applied", "file", s.QuotaConfig, "limits", len(lim.Limits))
		}
	}()
	return l, func() { close(done); <-exited }, nil
}

func readLimits(path string) (quota.Limits, time.Time, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return quota.Limits{}, time.Time{}, err
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return quota.Limits{}, time.Time{}, err
	}
	lim, err := quota.Parse(b)
	return lim, fi.ModTime(), err
}

func (s *Service) closeReplay() {
	if s.ReplayServer != nil {
		_ = s.ReplayServer.Close()
	}
}

// replayModels lists the model strings --replay serves, for the log.
func replayModels() []string {
	var out []string
	for _, sc := range replay.Scenarios() {
		out = append(out, sc.ModelString())
	}
	return out
}
