package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/llmworker/llmworker/internal/replay"
	"github.com/llmworker/llmworker/internal/service"
	"github.com/llmworker/llmworker/internal/service/gatewaysvc"
	"github.com/llmworker/llmworker/internal/service/hookbridgesvc"
	"github.com/llmworker/llmworker/internal/service/ingestsvc"
	"github.com/llmworker/llmworker/internal/service/toolexecsvc"
	"github.com/llmworker/llmworker/internal/service/turnsvc"
	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/telemetry"
)

const upAbout = `
Runs the whole system in one process: NATS (embedded, unless --nats-url /
$NATS_URL names a server) plus ingest, toolexec (built-in tools; --root for
the file tools), hookbridge (with --hooks), turn, and the HTTP gateway
(--http: the AI SDK chat protocol and the web UI). Prints how to connect.
Ctrl-C (SIGINT) or SIGTERM drains the services in reverse order.

--services runs a subset against an existing server, e.g. one Kubernetes
Deployment per service; --health-addr serves /healthz (alive) and /readyz
(services started and NATS connected) for probes.`

// upOptions are up's command line: its own flags, the shared ones and
// every service command's flags.
type upOptions struct {
	fs                                    *flag.FlagSet
	svcFlags                              *service.Flags
	conn                                  connFlags
	listen, storeDir, instance, hooks     string
	advertise                             string
	services, healthAddr, logLevel, logFm string
	replicas                              int
	provisionVerify                       bool
	tempStore                             bool
	drain, syncInterval                   time.Duration
	ing                                   ingestsvc.Service
	exec                                  toolexecsvc.Service
	hb                                    hookbridgesvc.Service
	tr                                    turnsvc.Service
	gw                                    gatewaysvc.Service
}

// newUpOptions registers up's flags.
func newUpOptions(env *Env) *upOptions {
	o := &upOptions{}
	fs := newFlags(env, "up", "up [flags]", upAbout)
	o.fs = fs
	o.conn.register(fs, env)
	f := service.NewMultiFlags(fs, env.getenv)
	o.svcFlags = f
	fs.StringVar(&o.listen, "listen", "127.0.0.1:4222", "embedded NATS: host:port to listen on (port 0 = random)")
	f.String(&o.storeDir, "store-dir", "LLMW_STORE_DIR", "", "embedded NATS: JetStream directory; turns, sessions and events survive a restart (default: "+defaultStoreDirHelp+")")
	f.String(&o.advertise, "advertise-url", "LLMW_ADVERTISE_URL", "", "the NATS URL clients use to reach this process, printed in the banner (e.g. the published port of a container; default the server's own URL)")
	f.Bool(&o.tempStore, "temp-store", "LLMW_TEMP_STORE", false, "embedded NATS: a temporary store removed on exit; at stop, running turns get --drain-timeout to finish, then they and paused turns end with llmw.turn.aborted")
	f.Duration(&o.syncInterval, "sync-interval", "LLMW_SYNC_INTERVAL", 0, "embedded NATS: fsync JetStream's files this often instead of on every write (0 = every write: an acknowledged event survives a power loss; docs/architecture.md#durability)")
	f.String(&o.instance, "instance", "LLMW_INSTANCE", "", "replica name of this process's services (default: random)")
	f.Int(&o.replicas, "replicas", "LLMW_REPLICAS", 1, "JetStream replicas of the streams and buckets created (3 on a 3-node cluster)")
	f.Bool(&o.provisionVerify, "provision-verify", "LLMW_PROVISION_VERIFY", false, "check the streams and buckets exist instead of creating or updating them (an identity without those rights; run llmworker provision first)")
	fs.StringVar(&o.services, "services", strings.Join(AllServices, ","), "services to run, comma-separated")
	f.String(&o.healthAddr, "health-addr", "LLMW_HEALTH_ADDR", "", "serve /healthz and /readyz on this address, e.g. :8081")
	f.String(&o.logLevel, "log-level", "LLMW_LOG_LEVEL", "info", "debug, info, warn or error")
	f.String(&o.logFm, "log-format", "LLMW_LOG_FORMAT", "text", "text or json")
	f.Duration(&o.drain, "drain-timeout", "LLMW_DRAIN_TIMEOUT", service.DefaultDrainTimeout, "how long shutdown waits for running turns, calls and streams")
	// Every flag of every service's own command, as --<flag> (for each
	// service that has it) and --<service>-<flag>.
	for _, svc := range []service.Service{&o.ing, &o.exec, &o.hb, &o.tr, &o.gw} {
		svc.Flags(f.For(svc.Name()))
	}
	fs.StringVar(&o.hooks, "hooks", "", "the same as --config: hookbridge config file (YAML) to serve")
	fs.Usage = func() { o.help(fs.Output()) }
	return o
}

// upCommon are the flags up's help lists first, in this order: how to
// reach or run NATS, where the store lives, the gateway's address, the
// demo models and the hooks. --http, --replay and --replay-pace are
// services' flags (gateway's; ingest's and toolexec's; ingest's), listed
// here rather than under their services.
var upCommon = []string{"nats-url", "listen", "temp-store", "store-dir", "http", "replay", "replay-pace", "hooks", "services"}

// help prints up's flags grouped: the common ones, then each service's
// own under its name. A service's flag is listed once, as --<flag> when
// no other service has one of that name, else as --<service>-<flag>;
// every form still parses.
func (o *upOptions) help(w io.Writer) {
	fmt.Fprintf(w, "usage: llmworker up [flags]\n\n%s\n", strings.TrimSpace(upAbout))
	entries := o.svcFlags.Entries()
	owners := map[string][]string{} // flag name -> services that have it
	svcFlag := map[string]bool{}    // every name a service's flag is set by
	var svcEntries []service.Entry
	for _, e := range entries {
		if e.Service != "" {
			svcEntries = append(svcEntries, e)
			owners[e.Name] = append(owners[e.Name], e.Service)
			svcFlag[e.Name], svcFlag[e.Service+"-"+e.Name] = true, true
		}
	}
	printed := map[string]bool{}
	section := func(title string) { fmt.Fprintf(w, "\n%s:\n", title) }
	own := func(name string) {
		if f := o.fs.Lookup(name); f != nil && !printed[name] {
			printed[name] = true
			typ, usage := flag.UnquoteUsage(f)
			for _, e := range entries {
				if e.Name == name {
					typ, usage = e.Type, e.Usage
					break
				}
			}
			printFlag(w, name, typ, usage, f.DefValue)
		}
	}
	section("common flags")
	for _, name := range upCommon {
		own(name)
	}
	var auth []string
	o.fs.VisitAll(func(f *flag.Flag) {
		switch {
		case svcFlag[f.Name] || printed[f.Name]:
		case strings.HasPrefix(f.Name, "nats-"):
			auth = append(auth, f.Name)
		default:
			own(f.Name)
		}
	})
	section("NATS authentication and TLS flags (as the nats CLI's; docs/security.md)")
	for _, name := range auth {
		own(name)
	}
	for _, svc := range []string{SvcIngest, SvcToolexec, SvcHookbridge, SvcTurn, SvcGateway} {
		section(svc + " flags")
		for _, e := range svcEntries {
			if e.Service != svc || printed[e.Name] {
				continue
			}
			name := e.Name
			if len(owners[e.Name]) > 1 {
				name = svc + "-" + e.Name
			}
			f := o.fs.Lookup(name)
			printFlag(w, name, e.Type, e.Usage, f.DefValue)
		}
	}
	var sharedNames []string
	for _, e := range svcEntries {
		if len(owners[e.Name]) > 1 && e.Service == owners[e.Name][0] {
			sharedNames = append(sharedNames, "--"+e.Name+" ("+strings.Join(owners[e.Name], ", ")+")")
		}
	}
	fmt.Fprintf(w, "\nA flag several services have sets it for each of them: %s.\n", strings.Join(sharedNames, ", "))
	for _, e := range svcEntries {
		if len(owners[e.Name]) == 1 {
			fmt.Fprintf(w, "Every service flag is also --<service>-<flag> (e.g. --%s-%s), for that service alone.\n", e.Service, e.Name)
			break
		}
	}
}

// printFlag prints a flag as the flag package's PrintDefaults does.
func printFlag(w io.Writer, name, typ, usage, def string) {
	line := "  -" + name
	if typ != "" {
		line += " " + typ
	}
	fmt.Fprintf(w, "%s\n    \t%s", line, strings.ReplaceAll(usage, "\n", "\n    \t"))
	switch def {
	case "", "0", "0s", "false", "[]":
	default:
		if typ == "string" {
			def = strconv.Quote(def)
		}
		fmt.Fprintf(w, " (default %s)", def)
	}
	fmt.Fprintln(w)
}

func runUp(ctx context.Context, env *Env, args []string) error {
	o := newUpOptions(env)
	fs := o.fs
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: up takes no arguments, got %q", ErrUsage, fs.Args())
	}
	if err := o.svcFlags.Err(); err != nil {
		return fmt.Errorf("%w: %v", ErrUsage, err)
	}
	if o.hooks != "" {
		o.hb.Config = o.hooks
	}
	gatewayModel(env, &o.gw.Options, o.ing.Replay)
	log, err := service.NewLogger(env.Stderr, o.logFm, o.logLevel)
	if err != nil {
		return err
	}
	svcs := service.SplitList(o.services)
	if o.conn.url == "" {
		switch {
		case o.tempStore && o.storeDir != "":
			return fmt.Errorf("%w: --temp-store and --store-dir %s: pick one", ErrUsage, o.storeDir)
		case o.tempStore:
		case o.storeDir == "":
			if o.storeDir, err = defaultStoreDir(env); err != nil {
				return fmt.Errorf("%w: no directory for the embedded NATS store (%v): pass --store-dir DIR or --temp-store", ErrUsage, err)
			}
		}
	}
	metrics, err := telemetry.SetupMetrics(ctx, telemetry.Config{Service: "llmworker", Instance: o.instance, Getenv: env.Getenv})
	if err != nil {
		return fmt.Errorf("%w: %w", ErrUsage, err)
	}
	defer func() {
		fctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = metrics.Shutdown(fctx)
	}()
	var cur atomic.Pointer[Stack]
	if o.healthAddr != "" {
		// Alive from the start, ready once every service serves.
		ln, err := net.Listen("tcp", o.healthAddr)
		if err != nil {
			return fmt.Errorf("--health-addr %s: %w", o.healthAddr, err)
		}
		health := &http.Server{Handler: healthHandler(&cur, metrics.Handler), ReadHeaderTimeout: 5 * time.Second}
		done := make(chan struct{})
		go func() {
			defer close(done)
			_ = health.Serve(ln)
		}()
		defer func() {
			_ = health.Close()
			<-done
		}()
	}
	// Services outlive the signal: ctx gives them values, Stop drains them.
	st, err := StartStack(context.WithoutCancel(ctx), StackConfig{
		NATSURL: o.conn.url, Auth: o.conn.auth, Listen: o.listen, StoreDir: o.storeDir, SyncInterval: o.syncInterval, Prefix: o.conn.prefix,
		Instance: o.instance, Replicas: o.replicas, ProvisionVerify: o.provisionVerify, Services: svcs, Getenv: env.Getenv, Logger: log,
		Ingest: o.ing.Options, Toolexec: o.exec.Options, Hookbridge: o.hb.Options, Turn: o.tr.Options, Gateway: o.gw.Options,
	})
	if err != nil {
		return err
	}
	cur.Store(st)
	printConnect(env, st, o.ing.Replay, o.advertise, o.gw.Model)
	// After the banner: whoever is told up started can read it.
	if env.Started != nil {
		env.Started(st)
	}
	select {
	case <-ctx.Done():
	case <-env.Interrupt:
	}
	fmt.Fprintf(env.Stderr, "draining (up to %s)…\n", o.drain)
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), o.drain)
	defer cancel()
	return st.Stop(dctx)
}

// healthHandler serves /healthz (the process runs), /readyz (every
// service started and NATS is connected) and /metrics.
func healthHandler(cur *atomic.Pointer[Stack], metrics http.Handler) http.Handler {
	return service.HealthHandler(func() bool {
		st := cur.Load()
		return st != nil && st.Ready()
	}, metrics)
}

// printConnect tells the person how to use the running system; gwModel
// is the model of the gateway's turns.
func printConnect(env *Env, st *Stack, replayOn bool, advertise, gwModel string) {
	s := events.NewSubjects(st.Prefix)
	w := env.Stdout
	url := st.URL
	if advertise != "" {
		url = advertise
	}
	fmt.Fprintf(w, "llmworker is up: %s\n", strings.Join(st.Services, ", "))
	where := "NATS"
	if st.Embedded != nil {
		where = "embedded NATS"
	}
	fmt.Fprintf(w, "  %-16s %s\n", where, url)
	if e := st.Embedded; e != nil {
		if e.Temporary() {
			fmt.Fprintf(w, "  %-16s %s (temporary: removed on exit)\n", "store", e.StoreDir)
		} else {
			fmt.Fprintf(w, "  %-16s %s (kept: turns, sessions and events survive a restart; --store-dir to move, --temp-store for none)\n", "store", e.StoreDir)
		}
	}
	if len(st.Tools) > 0 {
		fmt.Fprintf(w, "  %-16s %s\n", "tools", strings.Join(st.Tools, ", "))
	}
	if replayOn {
		// Each replay model plays one recording whatever it is asked:
		// say which, once, here.
		fmt.Fprintf(w, "  %-16s %s: each model plays its recorded conversation, whatever the prompt\n", "replay", replay.Label)
		for _, sc := range replay.Scenarios() {
			fmt.Fprintf(w, "  %-16s   %-25s %q\n", "", sc.ModelString(), sc.Prompt)
		}
	}
	cmd := env.command()
	if replayOn {
		// Without a key, chat in another terminal has no model but the
		// replay: name it.
		sc := replay.Scenarios()[0]
		fmt.Fprintf(w, "\nchat with it from another terminal:\n  NATS_URL=%s %s chat --model %s\n", url, cmd, sc.ModelString())
		fmt.Fprintf(w, "\nsubmit from a script:\n  NATS_URL=%s %s turn submit --model %s --prompt %q --follow\n", url, cmd, sc.ModelString(), sc.Prompt)
	} else {
		fmt.Fprintf(w, "\nchat with it from another terminal:\n  NATS_URL=%s %s chat \"hello\"\n", url, cmd)
		fmt.Fprintf(w, "\nsubmit from a script:\n  NATS_URL=%s %s turn submit --model <provider:model> --prompt \"hello\" --follow\n", url, cmd)
	}
	if st.GatewayURL != "" {
		fmt.Fprintf(w, "\nopen the web UI (model %s; or point an AI SDK useChat client at %s/api/chat):\n  %s/\n", gwModel, st.GatewayURL, st.GatewayURL)
	}
	fmt.Fprintf(w, "\nor publish CloudEvents yourself (docs/protocol.md §5 and §9.1):\n")
	fmt.Fprintf(w, "  submit  %s   (type %s)\n", s.TurnSubmit(), events.TypeTurnSubmit)
	fmt.Fprintf(w, "  resume  %s   (type %s)\n", s.TurnResume(), events.TypeTurnResume)
	fmt.Fprintf(w, "  cancel  %s\n", s.TurnCancel("<turn_id>"))
	fmt.Fprintf(w, "  events  %s   (stream %s)\n", s.Events("<session|_>", "<turn_id>", "<channel>"), events.StreamEvents)
	fmt.Fprintf(w, "  not run %s   (type %s)\n", strings.TrimSuffix(s.TurnRejected("_"), "_")+"<turn_id|_>", events.TypeTurnRejected)
	fmt.Fprintf(w, "\nCtrl-C drains and stops.\n")
}

// gatewayModel picks the gateway's model when --chat-model names none:
// the replay demo with --replay, else what chat would pick for the
// credentials set.
func gatewayModel(env *Env, o *gatewaysvc.Options, replayOn bool) {
	if o.Model != "" {
		return
	}
	if m := pickModel("", env, readCredentials(env)); m != "" && !replayOn {
		o.Model = m
		return
	}
	sc := replay.Scenarios()[0]
	o.Model, o.Prompt = sc.ModelString(), sc.Prompt
}
