package manifesttest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/llmworker/llmworker/internal/leaf/poll"
	"github.com/llmworker/llmworker/pkg/permissions"
	"github.com/llmworker/llmworker/pkg/provision"
)

// gatewayManifest is the gateway's Deployment and Service as the
// kustomization lists them (kustomization.yaml, not the file by name:
// dropping gateway.yaml from the resources fails here).
func gatewayManifest(t *testing.T) (appsv1.Deployment, corev1.Container, corev1.Service) {
	t.Helper()
	var dep *appsv1.Deployment
	var svc *corev1.Service
	for _, d := range manifests(t) {
		switch d.kind {
		case "Deployment":
			var v appsv1.Deployment
			if err := strict(d, &v); err != nil {
				t.Fatal(err)
			}
			if v.Name == "llmworker-gateway" {
				dep = &v
			}
		case "Service":
			var v corev1.Service
			if err := strict(d, &v); err != nil {
				t.Fatal(err)
			}
			if v.Name == "llmworker-gateway" {
				svc = &v
			}
		}
	}
	if dep == nil || svc == nil {
		t.Fatalf("kustomization.yaml lists no llmworker-gateway Deployment and Service (deployment %v, service %v)", dep != nil, svc != nil)
	}
	cs := dep.Spec.Template.Spec.Containers
	if len(cs) != 1 {
		t.Fatalf("gateway pod: %d containers, want 1", len(cs))
	}
	return *dep, cs[0], *svc
}

// argValue is the value of --name=value in args ("" when absent).
func argValue(args []string, name string) string {
	v := ""
	for _, a := range args {
		if s, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			v = s
		}
	}
	return v
}

// port is the port of a listen address such as ":8080".
func port(t *testing.T, addr string) int32 {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatalf("address %q: %v", addr, err)
	}
	n, err := strconv.Atoi(p)
	if err != nil {
		t.Fatalf("address %q: %v", addr, err)
	}
	return int32(n)
}

// containerPort resolves a probe's or Service's port (a name or a number)
// to the container's port number.
func containerPort(t *testing.T, c corev1.Container, p intstr.IntOrString) int32 {
	t.Helper()
	if p.Type == intstr.Int {
		return p.IntVal
	}
	for _, cp := range c.Ports {
		if cp.Name == p.StrVal {
			return cp.ContainerPort
		}
	}
	t.Fatalf("container %s has no port named %q", c.Name, p.StrVal)
	return 0
}

// envVar is the container's variable name.
func envVar(c corev1.Container, name string) *corev1.EnvVar {
	for i := range c.Env {
		if c.Env[i].Name == name {
			return &c.Env[i]
		}
	}
	return nil
}

// The gateway's manifest fits what cmd/gateway serves and what the
// gateway role may do: the image build-images.sh builds from
// cmd/gateway, the Service and the probes on the ports the command
// listens on, its tokens from a Secret, and the bus identity of the
// gateway role (pkg/permissions) with its password from a Secret.
func TestGatewayManifest(t *testing.T) {
	dep, c, svc := gatewayManifest(t)
	if dep.Spec.Replicas == nil || *dep.Spec.Replicas < 2 {
		t.Errorf("gateway replicas %v, want at least 2", dep.Spec.Replicas)
	}

	// The image is the one build-images.sh makes of cmd/gateway.
	name := imageCommand(c.Image)
	script, err := os.ReadFile(filepath.Join(repo, "deploy", "build-images.sh"))
	if err != nil {
		t.Fatal(err)
	}
	// It builds ./cmd/gateway (go build -o DIR/ names the binary gateway)
	// and an image of the binary gateway.
	var builds, images bool
	for l := range strings.Lines(string(script)) {
		f := strings.Fields(l)
		builds = builds || slices.Contains(f, "./cmd/gateway")
		images = images || len(f) > 2 && f[0] == "for" && f[1] == "bin" && slices.Contains(f, "gateway")
	}
	if name != "gateway" || !builds || !images {
		t.Errorf("image %s: want deploy/build-images.sh's gateway image (go build of ./cmd/gateway %v, an image of the binary gateway %v)", c.Image, builds, images)
	}

	// The Service reaches --http; the probes read --health-addr.
	httpPort := port(t, argValue(c.Args, "http"))
	healthPort := port(t, argValue(c.Args, "health-addr"))
	if svc.Spec.Type != corev1.ServiceTypeClusterIP || len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != 80 {
		t.Errorf("Service %s %v: want ClusterIP, port 80", svc.Spec.Type, svc.Spec.Ports)
	} else if got := containerPort(t, c, svc.Spec.Ports[0].TargetPort); got != httpPort {
		t.Errorf("Service targets port %d, the gateway listens on --http port %d", got, httpPort)
	}
	for k, v := range svc.Spec.Selector {
		if dep.Spec.Template.Labels[k] != v {
			t.Errorf("Service selector %s=%s does not select the gateway's pods (%v)", k, v, dep.Spec.Template.Labels)
		}
	}
	for _, p := range []struct {
		probe *corev1.Probe
		path  string
	}{{c.ReadinessProbe, "/readyz"}, {c.LivenessProbe, "/healthz"}} {
		if p.probe == nil || p.probe.HTTPGet == nil {
			t.Errorf("no HTTP probe for %s", p.path)
			continue
		}
		if p.probe.HTTPGet.Path != p.path || containerPort(t, c, p.probe.HTTPGet.Port) != healthPort {
			t.Errorf("probe %s on port %s, want %s on --health-addr's port %d", p.probe.HTTPGet.Path, p.probe.HTTPGet.Port.String(), p.path, healthPort)
		}
	}

	// Tokens come from a Secret, never from the manifest itself.
	if argValue(c.Args, "tokens") != "" || slices.ContainsFunc(c.Args, func(a string) bool { return strings.HasPrefix(a, "--tokens") }) {
		t.Error("the tokens are in the args: keep them in a Secret")
	}
	if e := envVar(c, "LLMW_GATEWAY_TOKENS"); e == nil || e.Value != "" || e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil {
		t.Errorf("LLMW_GATEWAY_TOKENS %+v: want it from a secretKeyRef", e)
	} else if o := e.ValueFrom.SecretKeyRef.Optional; o != nil && *o {
		t.Error("the tokens' Secret is optional: without it the gateway would serve every session to anyone in the cluster")
	}

	// The bus identity of the gateway role.
	var role permissions.User
	for _, u := range permissions.DefaultUsers() {
		if u.Role == permissions.Gateway {
			role = u
		}
	}
	if e := envVar(c, "NATS_USER"); e == nil || e.Value != role.Name {
		t.Errorf("NATS_USER %+v, want %s", e, role.Name)
	}
	if e := envVar(c, "NATS_PASSWORD"); e == nil || e.Value != "" || e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil || e.ValueFrom.SecretKeyRef.Key != role.PasswordEnv {
		t.Errorf("NATS_PASSWORD %+v: want it from a secretKeyRef with key %s", e, role.PasswordEnv)
	}
	if e := envVar(c, "LLMW_PROVISION_VERIFY"); e == nil || e.Value != "true" {
		t.Errorf("LLMW_PROVISION_VERIFY %+v: the gateway role may not create streams, want true", e)
	}

	// Like the other services: non-root, read-only, no privileges.
	sc := c.SecurityContext
	ps := dep.Spec.Template.Spec.SecurityContext
	if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
		sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") || ps == nil || ps.RunAsNonRoot == nil || !*ps.RunAsNonRoot {
		t.Errorf("securityContext pod %+v container %+v: want non-root, read-only root, no privilege escalation, capabilities dropped", ps, sc)
	}
	if c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() {
		t.Errorf("resources %+v: want memory requests and limits", c.Resources)
	}
}

// freeAddr is a localhost address nothing listens on now.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// configMap is the data of the named ConfigMap of the manifests.
func configMap(t *testing.T, name string) map[string]string {
	t.Helper()
	for _, d := range manifests(t) {
		if d.kind != "ConfigMap" {
			continue
		}
		var cm corev1.ConfigMap
		if err := json.Unmarshal(d.json, &cm); err != nil {
			t.Fatal(err)
		}
		if cm.Name == name {
			return cm.Data
		}
	}
	t.Fatalf("no ConfigMap %s", name)
	return nil
}

// startNATS starts a JetStream nats-server with the configuration text
// conf (listen and store added) and makes the streams and buckets as
// `llmworker provision` does, connecting with opts.
func startNATS(t *testing.T, conf, prefix string, opts ...nats.Option) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "nats.conf")
	body := fmt.Sprintf("listen: \"127.0.0.1:-1\"\njetstream { store_dir: %q }\n%s", t.TempDir(), conf)
	if err := os.WriteFile(file, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	o, err := server.ProcessConfigFile(file)
	if err != nil {
		t.Fatal(err)
	}
	o.NoSigs, o.NoLog = true, true
	srv, err := server.NewServer(o)
	if err != nil {
		t.Fatal(err)
	}
	go srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server not ready")
	}
	t.Cleanup(srv.Shutdown)
	nc, err := nats.Connect(srv.ClientURL(), opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := provision.Provision(ctx, js, provision.Options{Prefix: prefix}); err != nil {
		t.Fatal(err)
	}
	return srv.ClientURL()
}

// The gateway runs as its manifest says: with the manifest's args and
// environment (the ConfigMap, its own values, the Secrets' keys) it turns
// ready on the readiness probe's path and its API refuses a caller
// without a token of the Secret and serves one with it; on a nats-server
// that enforces the roles of `llmworker permissions` (after `llmworker
// provision`'s work as the provisioner), and on one without identities,
// where the optional password Secret is absent.
func TestGatewayRunsAsManifested(t *testing.T) {
	_, c, _ := gatewayManifest(t)
	cm := configMap(t, "llmworker")
	prefix := cm["LLMW_PREFIX"]
	bin := buildCommand(t, imageCommand(c.Image))
	const token = "manifest-test-token-0123456789"

	t.Run("identities", func(t *testing.T) {
		pw := map[permissions.Role]string{}
		for _, u := range permissions.DefaultUsers() {
			pw[u.Role] = fmt.Sprintf("pw-%s-%d", u.Role, time.Now().UnixNano())
			t.Setenv(u.PasswordEnv, pw[u.Role])
		}
		url := startNATS(t, permissions.Config(prefix, permissions.DefaultUsers()), prefix,
			nats.UserInfo("llmw-"+string(permissions.Provisioner), pw[permissions.Provisioner]))
		runGateway(t, bin, c, cm, url, map[string]string{"LLMW_GATEWAY_TOKENS": token, "LLMW_GATEWAY_PASSWORD": pw[permissions.Gateway]}, token)
	})
	t.Run("no identities", func(t *testing.T) {
		url := startNATS(t, "", prefix)
		runGateway(t, bin, c, cm, url, map[string]string{"LLMW_GATEWAY_TOKENS": token}, token)
	})
}

// runGateway runs bin as container c on NATS at url, with the ConfigMap
// cm and the Secrets' keys secrets (a key absent from an optional
// Secret leaves its variable unset), and checks the probes and the
// token.
func runGateway(t *testing.T, bin string, c corev1.Container, cm map[string]string, url string, secrets map[string]string, token string) {
	t.Helper()
	env := []string{"HOME=" + t.TempDir()}
	for k, v := range cm {
		if k == "NATS_URL" {
			v = url
		}
		env = append(env, k+"="+v)
	}
	for _, e := range c.Env {
		v := e.Value
		if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
			ref := e.ValueFrom.SecretKeyRef
			var ok bool
			if v, ok = secrets[ref.Key]; !ok {
				if ref.Optional == nil || !*ref.Optional {
					t.Fatalf("env %s: the test has no value for the key %s of the required Secret %s", e.Name, ref.Key, ref.Name)
				}
				continue
			}
		}
		env = append(env, e.Name+"="+v)
	}
	// The manifest's args, then localhost addresses on free ports (the
	// manifest's own ports are checked against its probes and Service by
	// TestGatewayManifest).
	httpAddr, healthAddr := freeAddr(t), freeAddr(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append(slices.Clone(c.Args), "--http="+httpAddr, "--health-addr="+healthAddr, "--log-format=text")...)
	cmd.Env = env
	var logs syncBuffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = cmd.Process.Signal(os.Interrupt)
		if err := cmd.Wait(); err != nil {
			t.Errorf("the gateway did not drain cleanly: %v", err)
		}
		if t.Failed() {
			t.Logf("gateway log:\n%s", logs.String())
		}
	}()
	get := func(url, tok string) int {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	poll.Until(t, time.Minute, "the readiness probe to pass", func() bool {
		return get("http://"+healthAddr+c.ReadinessProbe.HTTPGet.Path, "") == http.StatusOK
	})
	if got := get("http://"+healthAddr+c.LivenessProbe.HTTPGet.Path, ""); got != http.StatusOK {
		t.Errorf("liveness probe: %d", got)
	}
	if got := get("http://"+httpAddr+"/api/sessions", ""); got != http.StatusUnauthorized {
		t.Errorf("GET /api/sessions without a token: %d, want 401", got)
	}
	if got := get("http://"+httpAddr+"/api/sessions", token); got != http.StatusOK {
		t.Errorf("GET /api/sessions with the Secret's token: %d, want 200", got)
	}
	if regexp.MustCompile(`(?i)permissions violation`).MatchString(logs.String()) {
		t.Error("the server refused the gateway something")
	}
}

// syncBuffer is a bytes.Buffer a process's output and the test share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
