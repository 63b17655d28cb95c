//go:build e2e

package e2e

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/testcontainers/testcontainers-go"
	tcnetwork "github.com/testcontainers/testcontainers-go/network"
	"github.com/testcontainers/testcontainers-go/wait"

	"github.com/llmworker/llmworker/internal/cli"
	"github.com/llmworker/llmworker/internal/replay/demotools"
	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/permissions"
)

// Binaries built by TestMain, by image key.
var packages = map[string]string{
	"nats":     "github.com/nats-io/nats-server/v2",
	"ingest":   "github.com/llmworker/llmworker/cmd/ingest",
	"turn":     "github.com/llmworker/llmworker/test/e2e/cmd/e2eturn",
	"toolexec": "github.com/llmworker/llmworker/test/e2e/cmd/e2etoolexec",
	// cmd/hookbridge as shipped; only clusters with hooks run it.
	"hookbridge": "github.com/llmworker/llmworker/cmd/hookbridge",
}

var (
	// skipReason is set when Docker cannot be used: every test skips.
	skipReason string
	// setupErr is a failure to build the binaries or images: every test
	// fails with it.
	setupErr error
	// images maps an image key to the built image reference.
	images = map[string]string{}
	docker client.APIClient
	// owner labels everything a run creates (host/pid), so that a later
	// run removes what an interrupted one left behind (there is no Ryuk).
	owner = ownerLabel()
)

const ownerKey = "llmw-e2e-owner"

func ownerLabel() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%s/%d", host, os.Getpid())
}

func TestMain(m *testing.M) { os.Exit(testMain(m)) }

func testMain(m *testing.M) int {
	// Ryuk would have to be pulled; the tests remove what they start.
	os.Setenv("TESTCONTAINERS_RYUK_DISABLED", "true")
	p, err := dockerProvider()
	if err != nil {
		skipReason = "Docker is not reachable: " + err.Error()
		return m.Run()
	}
	defer p.Close()
	docker = p.Client()
	sweep()
	dir, err := os.MkdirTemp("", "llmw-e2e-*")
	if err != nil {
		setupErr = err
		return m.Run()
	}
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	start := time.Now()
	setupErr = buildImages(ctx, p, dir)
	cancel()
	fmt.Fprintf(os.Stderr, "e2e: binaries and images built in %s (err %v)\n", time.Since(start).Round(time.Millisecond), setupErr)
	code := m.Run()
	removeComposeImages()
	for _, ref := range images {
		_, _ = docker.ImageRemove(context.Background(), ref, client.ImageRemoveOptions{Force: true, PruneChildren: true})
	}
	return code
}

// dockerProvider connects to the Docker Engine; testcontainers panics in
// some setups without one.
func dockerProvider() (p *testcontainers.DockerProvider, err error) {
	defer func() {
		if r := recover(); r != nil {
			p, err = nil, fmt.Errorf("%v", r)
		}
	}()
	p, err = testcontainers.NewDockerProvider()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := p.Health(ctx); err != nil {
		p.Close()
		return nil, err
	}
	return p, nil
}

// buildImages compiles the binaries and builds one FROM scratch image each.
// natsConfName is the nats-server configuration every e2e node runs with:
// deploy/nats.conf, the JetStream settings llmworker documents for a
// cluster (docs/architecture.md#durability).
const natsConfName = "nats.conf"

func buildImages(ctx context.Context, p *testcontainers.DockerProvider, dir string) error {
	bin := filepath.Join(dir, "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		return err
	}
	keys := slices.Sorted(func(yield func(string) bool) {
		for k := range packages {
			if !yield(k) {
				return
			}
		}
	})
	// One go build of every binary: it compiles the packages they share
	// once and links the binaries side by side.
	args := []string{"build", "-trimpath", "-ldflags=-s -w", "-o", bin + string(filepath.Separator)}
	for _, k := range keys {
		args = append(args, packages[k])
	}
	// go test puts its own go first on PATH; a test binary built with
	// -trimpath (.ci/run) knows no GOROOT.
	goCmd := "go"
	if root := runtime.GOROOT(); root != "" {
		goCmd = filepath.Join(root, "bin", "go")
	}
	cmd := exec.CommandContext(ctx, goCmd, args...)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+runtime.GOARCH)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	natsConf, err := os.ReadFile(filepath.Join("..", "..", "deploy", natsConfName))
	if err != nil {
		return err
	}
	tag := fmt.Sprintf("e2e%d", time.Now().UnixNano())
	for _, k := range keys {
		cdir := filepath.Join(dir, "ctx-"+k)
		// /tmp must exist for os.TempDir users; scratch has nothing.
		if err := os.MkdirAll(filepath.Join(cdir, "tmp"), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(cdir, "tmp", ".keep"), nil, 0o644); err != nil {
			return err
		}
		b, err := os.ReadFile(filepath.Join(bin, binaryName(packages[k])))
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(cdir, "x"), b, 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(cdir, natsConfName), natsConf, 0o644); err != nil {
			return err
		}
		df := "FROM scratch\nCOPY x /x\nCOPY tmp /tmp\nCOPY " + natsConfName + " /" + natsConfName + "\nLABEL " + ownerKey + "=\"" + owner + "\"\nENTRYPOINT [\"/x\"]\n"
		if err := os.WriteFile(filepath.Join(cdir, "Dockerfile"), []byte(df), 0o644); err != nil {
			return err
		}
		ref, err := p.BuildImage(ctx, &testcontainers.ContainerRequest{FromDockerfile: testcontainers.FromDockerfile{
			Context: cdir, Repo: "llmw-e2e-" + k, Tag: tag, KeepImage: true,
		}})
		if err != nil {
			return fmt.Errorf("build image %s: %w", k, err)
		}
		images[k] = ref
	}
	return nil
}

// binaryName is the file go build -o dir/ writes for package pkg: its last
// path element, or the one before a major version suffix (/v2).
func binaryName(pkg string) string {
	name := path.Base(pkg)
	if v := strings.TrimPrefix(name, "v"); v != name && v != "" && strings.Trim(v, "0123456789") == "" {
		name = path.Base(path.Dir(pkg))
	}
	return name
}

// sweep removes the containers, networks and images of earlier runs on
// this host whose test process is gone (a run killed before its cleanup).
func sweep() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	host, _ := os.Hostname()
	stale := func(labels map[string]string) bool {
		h, pid, ok := strings.Cut(labels[ownerKey], "/")
		if !ok || h != host {
			return false
		}
		var n int
		if _, err := fmt.Sscan(pid, &n); err != nil || n == os.Getpid() {
			return false
		}
		return syscall.Kill(n, 0) == syscall.ESRCH
	}
	f := client.Filters{}.Add("label", ownerKey)
	if cs, err := docker.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: f}); err == nil {
		for _, ctr := range cs.Items {
			if stale(ctr.Labels) {
				_, _ = docker.ContainerRemove(ctx, ctr.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
			}
		}
	}
	if ns, err := docker.NetworkList(ctx, client.NetworkListOptions{Filters: f}); err == nil {
		for _, n := range ns.Items {
			if stale(n.Labels) {
				_, _ = docker.NetworkRemove(ctx, n.ID, client.NetworkRemoveOptions{})
			}
		}
	}
	if is, err := docker.ImageList(ctx, client.ImageListOptions{Filters: f}); err == nil {
		for _, im := range is.Items {
			if stale(im.Labels) {
				_, _ = docker.ImageRemove(ctx, im.ID, client.ImageRemoveOptions{Force: true, PruneChildren: true})
			}
		}
	}
}

// requireDocker skips or fails the test when the images are missing.
func requireDocker(t *testing.T) {
	t.Helper()
	if skipReason != "" {
		t.Skip(skipReason)
	}
	if setupErr != nil {
		t.Fatal(setupErr)
	}
}

// Options of a cluster.
type clusterOpts struct {
	// slow is e2etoolexec's --slow (e.g. "fixed_version=8s").
	slow string
	// turnAckWait and toolAckWait are the consumers' AckWait.
	turnAckWait, toolAckWait time.Duration
	// replayPace is ingest's --replay-pace (per token of about four
	// characters, internal/replay): streams that take a while, so
	// that faults land mid-stream.
	replayPace time.Duration
	// stepRetries is the turn service's --step-retries (0 = its default):
	// more, to ride out a restart of the only ingest replica. faulty sets
	// it to 30 (about 27 s of retries) and ingestTimeout to 10 s, so that
	// a model call lost in a partition is made again within a test's
	// patience.
	stepRetries   int
	ingestTimeout time.Duration
	// hooks, when not empty, is a hook config (YAML) that a hookbridge
	// container, hookbridge-1, serves.
	hooks string
	// otlp makes every service export its spans over OTLP/HTTP to a
	// receiver in the test process (cluster.otlp).
	otlp bool
	// secure runs the nodes with TLS from a CA made for the test and the
	// identities of `llmworker permissions`; each service connects as its
	// role, provisioning is the provisioner's (cluster.sec).
	secure bool
}

// faulty returns o set up for a run with faults (see stepRetries).
func (o clusterOpts) faulty() clusterOpts {
	o.stepRetries, o.ingestTimeout = 30, 10*time.Second
	return o
}

// cluster is a three-node NATS cluster plus ingest ×1, turn ×2 and
// toolexec ×2, each in its own container on one private network, and a
// client in the test process connected through the mapped ports.
type cluster struct {
	t     *testing.T
	net   *testcontainers.DockerNetwork
	mu    sync.Mutex
	ctrs  map[string]testcontainers.Container // by name: n1..n3, ingest-1, turn-1, ...
	nc    *nats.Conn
	js    jetstream.JetStream
	subj  events.Subjects
	start time.Time
	// files are copied into a container before it starts, by name.
	files map[string][]testcontainers.ContainerFile
	// aliases are the network names of each container (n1, …), given
	// again when reconnect puts a container back on the network.
	aliases map[string][]string
	// otlp receives the services' spans (clusterOpts.otlp).
	otlp *otlpReceiver
	// sec is the PKI and passwords of a secure cluster (clusterOpts.secure).
	sec *secure
	// agentsOnce stores the agents of agentScenario (putAgents).
	agentsOnce sync.Once
}

var nodeNames = []string{"n1", "n2", "n3"}

const replicas = 3

func startCluster(t *testing.T, o clusterOpts) *cluster {
	t.Helper()
	requireDocker(t)
	if o.turnAckWait == 0 {
		o.turnAckWait = 5 * time.Second
	}
	if o.toolAckWait == 0 {
		o.toolAckWait = 3 * time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c := &cluster{t: t, ctrs: map[string]testcontainers.Container{}, subj: events.NewSubjects(""), start: time.Now(), files: map[string][]testcontainers.ContainerFile{}, aliases: map[string][]string{}}
	nw, err := tcnetwork.New(ctx, tcnetwork.WithLabels(map[string]string{ownerKey: owner}))
	if err != nil {
		t.Fatal(err)
	}
	c.net = nw
	testcontainers.CleanupNetwork(t, nw)
	// Registered after the network's cleanup, so it runs before it:
	// logs of a failed test, then the containers go, then the network.
	t.Cleanup(c.terminate)

	routes := make([]string, len(nodeNames))
	for i, n := range nodeNames {
		routes[i] = "nats://" + n + ":6222"
	}
	conf, nodeEnv := "/"+natsConfName, []string(nil)
	if o.secure {
		c.sec = newSecure(t)
		conf, nodeEnv = c.sec.nodeConf(c)
	}
	err = c.parallel(ctx, nodeNames, func(ctx context.Context, n string) error {
		return c.runEnv(ctx, n, "nats", []string{n}, []string{"4222/tcp"}, "Server is ready", nodeEnv,
			"--config", conf, "--name", n, "--port", "4222", "--jetstream", "--store_dir", "/data",
			"--cluster_name", "llmw-e2e", "--cluster", "nats://0.0.0.0:6222",
			"--routes", strings.Join(routes, ","), "--no_advertise")
	})
	if err != nil {
		t.Fatal(err)
	}
	var urls []string
	for _, n := range nodeNames {
		urls = append(urls, "nats://"+n+":4222")
	}
	copts := []nats.Option{nats.MaxReconnects(-1), nats.ReconnectWait(100 * time.Millisecond), nats.Name("e2e test"),
		nats.SetCustomDialer(&nodeDialer{c: c})}
	if c.sec != nil {
		copts = append(copts, c.sec.as(testUser)...)
	}
	c.nc, err = nats.Connect(strings.Join(urls, ","), copts...)
	if err != nil {
		t.Fatalf("connect to %v: %v", urls, err)
	}
	t.Cleanup(c.nc.Close)
	c.js, err = jetstream.New(c.nc)
	if err != nil {
		t.Fatal(err)
	}
	// JetStream answers once the meta group has a leader.
	c.eventually(time.Minute, "JetStream cluster ready", func() (bool, string) {
		actx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		_, err := c.js.AccountInfo(actx)
		return err == nil, fmt.Sprint(err)
	})
	// Provisioned up front, as deploy/k8s/README.md tells an operator to:
	// `llmworker provision --replicas 3` (so that five processes do not all
	// create R3 streams at once; their own provisioning is then an
	// identical update).
	c.eventually(time.Minute, "streams provisioned", func() (bool, string) {
		pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		host, err := mappedHost(pctx, c.ctr("n1"))
		if err != nil {
			return false, err.Error()
		}
		port, err := c.ctr("n1").MappedPort(pctx, "4222/tcp")
		if err != nil {
			return false, err.Error()
		}
		addr := net.JoinHostPort(host, port.Port())
		var out, errOut bytes.Buffer
		getenv := func(string) string { return "" }
		if c.sec != nil {
			getenv = c.sec.env(permissions.Provisioner, c.sec.pki.CA)
		}
		code := cli.Main(pctx, []string{"provision", "--replicas", fmt.Sprint(replicas), "--nats-url", "nats://" + addr},
			cli.Env{Stdout: &out, Stderr: &errOut, Getenv: getenv})
		return code == 0, fmt.Sprintf("llmworker provision: exit %d: %s", code, errOut.String())
	})

	natsURL := "nats://n1:4222,nats://n2:4222,nats://n3:4222"
	env := []string{"NATS_URL=" + natsURL}
	if o.otlp {
		c.otlp = startOTLPReceiver(ctx, t, nw)
		// The standard variables (pkg/telemetry.Setup); spans leave each
		// process within 100 ms of ending, so that a replica killed
		// mid-turn has sent the spans it finished.
		env = append(env, "OTEL_EXPORTER_OTLP_ENDPOINT=http://"+c.otlp.addr, "OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf",
			"OTEL_BSP_SCHEDULE_DELAY=100", "OTEL_METRIC_EXPORT_INTERVAL=3600000")
	}
	services := []struct {
		name, image, ready string
		args               []string
	}{
		{"ingest-1", "ingest", "ingest started", []string{"--replay", "--instance", "ingest-1", "--replay-pace", o.replayPace.String()}},
		{"turn-1", "turn", "turn service started", []string{"--instance", "turn-1", "--replicas", fmt.Sprint(replicas), "--ack-wait", o.turnAckWait.String(), "--step-retries", fmt.Sprint(o.stepRetries), "--ingest-timeout", o.ingestTimeout.String(), "--hooks=" + fmt.Sprint(o.hooks != "")}},
		{"turn-2", "turn", "turn service started", []string{"--instance", "turn-2", "--replicas", fmt.Sprint(replicas), "--ack-wait", o.turnAckWait.String(), "--step-retries", fmt.Sprint(o.stepRetries), "--ingest-timeout", o.ingestTimeout.String(), "--hooks=" + fmt.Sprint(o.hooks != "")}},
		{"toolexec-1", "toolexec", "toolexec started", []string{"--instance", "toolexec-1", "--replicas", fmt.Sprint(replicas), "--ack-wait", o.toolAckWait.String(), "--slow", o.slow}},
		{"toolexec-2", "toolexec", "toolexec started", []string{"--instance", "toolexec-2", "--replicas", fmt.Sprint(replicas), "--ack-wait", o.toolAckWait.String(), "--slow", o.slow}},
	}
	if o.hooks != "" {
		c.files["hookbridge-1"] = append(c.files["hookbridge-1"], testcontainers.ContainerFile{Reader: strings.NewReader(o.hooks), ContainerFilePath: "/hooks.yaml", FileMode: 0o644})
		services = append(services, struct {
			name, image, ready string
			args               []string
		}{"hookbridge-1", "hookbridge", "serving hook", []string{"--instance", "hookbridge-1", "--config", "/hooks.yaml"}})
	}
	names := make([]string, len(services))
	for i, s := range services {
		names[i] = s.name
	}
	err = c.parallel(ctx, names, func(ctx context.Context, name string) error {
		for _, s := range services {
			if s.name == name {
				senv := env
				if c.sec != nil {
					senv = append(slices.Clone(env), c.sec.serviceEnv(c, name)...)
				}
				return c.runEnv(ctx, s.name, s.image, nil, nil, s.ready, senv, s.args...)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// Turns need the tools in the catalog and ingest answering.
	c.eventually(time.Minute, "services ready", func() (bool, string) {
		if _, err := c.nc.Request("$SRV.PING.llmw-ingest", nil, time.Second); err != nil {
			return false, "ingest: " + err.Error()
		}
		kv, err := c.js.KeyValue(ctx, events.BucketTools)
		if err != nil {
			return false, err.Error()
		}
		names := []string{"calculator"}
		for _, tl := range demotools.Tools() {
			names = append(names, tl.Name())
		}
		for _, name := range names {
			if _, err := kv.Get(ctx, name); err != nil {
				return false, "tool " + name + ": " + err.Error()
			}
		}
		return true, ""
	})
	t.Logf("cluster of %d containers up in %s", len(c.ctrs), time.Since(c.start).Round(time.Millisecond))
	return c
}

// mappedHost is where the container's published ports are reached from
// the test process. testcontainers guesses the default gateway when the
// tests run inside a container (/.dockerenv), which is wrong for a daemon
// on this machine's own socket: its ports are published here.
// nodeDialer dials a NATS node by its container name (the client's URLs
// are nats://n1:4222, …) at the host port the container has now: a
// restarted container is given a new one, so a client that kept the ports
// it first saw would, after a few node restarts, have none left to
// reconnect to.
type nodeDialer struct {
	c *cluster
	d net.Dialer
}

func (d *nodeDialer) Dial(network, address string) (net.Conn, error) {
	name, _, err := net.SplitHostPort(address)
	if err != nil {
		return nil, err
	}
	d.c.mu.Lock()
	ctr, ok := d.c.ctrs[name]
	d.c.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("no container %s", name)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	host, err := mappedHost(ctx, ctr)
	if err != nil {
		return nil, err
	}
	port, err := ctr.MappedPort(ctx, "4222/tcp")
	if err != nil {
		return nil, err
	}
	return d.d.DialContext(ctx, network, net.JoinHostPort(host, port.Port()))
}

func mappedHost(ctx context.Context, ctr testcontainers.Container) (string, error) {
	if os.Getenv("TESTCONTAINERS_HOST_OVERRIDE") == "" && strings.HasPrefix(docker.DaemonHost(), "unix://") {
		return "127.0.0.1", nil
	}
	return ctr.Host(ctx)
}

func (c *cluster) parallel(ctx context.Context, names []string, f func(context.Context, string) error) error {
	errs := make([]error, len(names))
	var wg sync.WaitGroup
	for i, n := range names {
		wg.Go(func() { errs[i] = f(ctx, n) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

func (c *cluster) run(ctx context.Context, name, image string, aliases, ports []string, ready string, args ...string) error {
	return c.runEnv(ctx, name, image, aliases, ports, ready, nil, args...)
}

// runEnv starts a container on the cluster network and waits for the log
// line ready.
func (c *cluster) runEnv(ctx context.Context, name, image string, aliases, ports []string, ready string, env []string, args ...string) error {
	envMap := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		envMap[k] = v
	}
	req := testcontainers.GenericContainerRequest{
		ContainerRequest: testcontainers.ContainerRequest{
			Image:          images[image],
			Cmd:            args,
			Env:            envMap,
			ExposedPorts:   ports,
			Networks:       []string{c.net.Name},
			NetworkAliases: map[string][]string{c.net.Name: aliases},
			Labels:         map[string]string{ownerKey: owner, "llmw-e2e-test": c.t.Name(), "llmw-e2e-name": name},
			Files:          c.files[name],
			WaitingFor:     wait.ForLog(ready).WithStartupTimeout(90 * time.Second),
		},
		Started: true,
	}
	ctr, err := testcontainers.GenericContainer(ctx, req)
	if ctr != nil {
		c.mu.Lock()
		c.ctrs[name] = ctr
		c.aliases[name] = aliases
		c.mu.Unlock()
	}
	if err != nil {
		return fmt.Errorf("start %s: %w", name, err)
	}
	return nil
}

func (c *cluster) ctr(name string) testcontainers.Container {
	c.mu.Lock()
	defer c.mu.Unlock()
	ctr, ok := c.ctrs[name]
	if !ok {
		c.t.Fatalf("no container %s", name)
	}
	return ctr
}

// terminate prints the logs of every container when the test failed, then
// removes the containers.
func (c *cluster) terminate() {
	c.mu.Lock()
	defer c.mu.Unlock()
	names := slices.Sorted(func(yield func(string) bool) {
		for k := range c.ctrs {
			if !yield(k) {
				return
			}
		}
	})
	// Services first, so that their logs do not end in the noise of the
	// nodes going away.
	slices.SortStableFunc(names, func(a, b string) int {
		isNode := func(n string) int {
			if slices.Contains(nodeNames, n) {
				return 1
			}
			return 0
		}
		return cmp.Compare(isNode(a), isNode(b))
	})
	dir := os.Getenv("LLMW_E2E_LOGDIR")
	for _, n := range names {
		ctr := c.ctrs[n]
		if c.t.Failed() || dir != "" {
			if logs, err := c.logsOf(ctr); err == nil {
				if c.t.Failed() {
					c.t.Logf("==== logs of %s ====\n%s", n, tail(logs, 60))
				}
				if dir != "" {
					f := filepath.Join(dir, strings.ReplaceAll(c.t.Name(), "/", "_")+"-"+n+".log")
					if err := os.WriteFile(f, []byte(logs), 0o644); err != nil {
						c.t.Log(err)
					}
				}
			}
		}
		if err := testcontainers.TerminateContainer(ctr, testcontainers.StopTimeout(0)); err != nil {
			c.t.Logf("terminate %s: %v", n, err)
		}
	}
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = append([]string{fmt.Sprintf("... %d lines before", len(lines)-n)}, lines[len(lines)-n:]...)
	}
	return strings.Join(lines, "\n")
}

func (c *cluster) logsOf(ctr testcontainers.Container) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rc, err := ctr.Logs(ctx)
	if err != nil {
		return "", err
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	return string(b), err
}

// logs returns the container's output so far.
func (c *cluster) logs(name string) string {
	c.t.Helper()
	s, err := c.logsOf(c.ctr(name))
	if err != nil {
		c.t.Fatalf("logs of %s: %v", name, err)
	}
	return s
}

// logRecords returns the JSON log records of a container whose msg is msg.
func (c *cluster) logRecords(name, msg string) []map[string]any {
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(c.logs(name)))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if i := bytes.IndexByte(line, '{'); i > 0 {
			line = line[i:]
		}
		var rec map[string]any
		if json.Unmarshal(line, &rec) == nil && rec["msg"] == msg {
			out = append(out, rec)
		}
	}
	return out
}

// kill sends SIGKILL: a crash, no drain.
func (c *cluster) kill(name string) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := docker.ContainerKill(ctx, c.ctr(name).GetContainerID(), client.ContainerKillOptions{Signal: "KILL"}); err != nil {
		c.t.Fatalf("kill %s: %v", name, err)
	}
	c.t.Logf("%s killed at +%s", name, time.Since(c.start).Round(time.Millisecond))
}

// pause freezes every process of a container (SIGSTOP-like, through the
// cgroup freezer): it holds its connections and state but does nothing.
func (c *cluster) pause(name string) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := docker.ContainerPause(ctx, c.ctr(name).GetContainerID(), client.ContainerPauseOptions{}); err != nil {
		c.t.Fatalf("pause %s: %v", name, err)
	}
	c.t.Logf("%s paused at +%s", name, time.Since(c.start).Round(time.Millisecond))
}

// unpause lets a paused container run on from where it stopped.
func (c *cluster) unpause(name string) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := docker.ContainerUnpause(ctx, c.ctr(name).GetContainerID(), client.ContainerUnpauseOptions{}); err != nil {
		c.t.Fatalf("unpause %s: %v", name, err)
	}
	c.t.Logf("%s unpaused at +%s", name, time.Since(c.start).Round(time.Millisecond))
}

// sigterm stops a container with SIGTERM, as Kubernetes does, and waits
// up to 30 s for the process to drain and exit.
func (c *cluster) sigterm(name string) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	grace := 30
	start := time.Now()
	if _, err := docker.ContainerStop(ctx, c.ctr(name).GetContainerID(), client.ContainerStopOptions{Signal: "TERM", Timeout: &grace}); err != nil {
		c.t.Fatalf("stop %s: %v", name, err)
	}
	c.t.Logf("%s stopped by SIGTERM at +%s (exited after %s)", name, time.Since(c.start).Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
}

// restart starts a stopped or killed container again with its command:
// a NATS node catches up from its store and the cluster, a service
// rejoins.
func (c *cluster) restart(name string) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := docker.ContainerStart(ctx, c.ctr(name).GetContainerID(), client.ContainerStartOptions{}); err != nil {
		c.t.Fatalf("restart %s: %v", name, err)
	}
	c.t.Logf("%s restarted at +%s", name, time.Since(c.start).Round(time.Millisecond))
}

// disconnect cuts a container off the cluster network (its only network):
// the process keeps running but reaches nobody.
func (c *cluster) disconnect(name string) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := docker.NetworkDisconnect(ctx, c.net.ID, client.NetworkDisconnectOptions{Container: c.ctr(name).GetContainerID(), Force: true}); err != nil {
		c.t.Fatalf("disconnect %s: %v", name, err)
	}
	c.t.Logf("%s cut off at +%s", name, time.Since(c.start).Round(time.Millisecond))
}

// reconnect attaches a container to the cluster network again.
func (c *cluster) reconnect(name string) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// Without its aliases a node is not found by name (n3): the
	// other nodes could not route to it, and the partition would never
	// fully heal.
	c.mu.Lock()
	aliases := c.aliases[name]
	c.mu.Unlock()
	if _, err := docker.NetworkConnect(ctx, c.net.ID, client.NetworkConnectOptions{Container: c.ctr(name).GetContainerID(),
		EndpointConfig: &network.EndpointSettings{Aliases: aliases}}); err != nil {
		c.t.Fatalf("reconnect %s: %v", name, err)
	}
	c.t.Logf("%s reconnected at +%s", name, time.Since(c.start).Round(time.Millisecond))
}

// retry runs a NATS operation with a fresh 5 s context until it succeeds
// or a minute passes, as a client does: a request sent while a node is
// lost or a leader is being elected gets no answer, and waiting longer on
// that one request does not help.
func (c *cluster) retry(what string, f func(ctx context.Context) error) {
	c.t.Helper()
	c.eventually(time.Minute, what, func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		err := f(ctx)
		return err == nil, fmt.Sprint(err)
	})
}

// eventually polls f every 100 ms until it reports done or timeout passes;
// the last detail goes into the failure.
func (c *cluster) eventually(timeout time.Duration, what string, f func() (bool, string)) {
	c.t.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		ok, detail := f()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("%s: not within %s: %s", what, timeout, detail)
		}
		<-tick.C
	}
}
