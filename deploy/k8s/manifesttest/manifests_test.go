package manifesttest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	kedav1alpha1 "github.com/kedacore/keda/v2/apis/keda/v1alpha1"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"sigs.k8s.io/yaml"

	"github.com/llmworker/llmworker/internal/leaf/poll"
	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/toolexec"
)

// repo is the repository root, from deploy/k8s/manifesttest.
var repo = filepath.Join("..", "..", "..")

// doc is one YAML document of a manifest file.
type doc struct {
	file string
	kind string
	json []byte
}

// manifests reads every document of the kustomizations' files.
func manifests(t *testing.T) []doc {
	t.Helper()
	var docs []doc
	for _, dir := range []string{"..", filepath.Join("..", "keda")} {
		var k struct {
			Resources []string `json:"resources"`
		}
		b, err := os.ReadFile(filepath.Join(dir, "kustomization.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		if err := yaml.Unmarshal(b, &k); err != nil {
			t.Fatalf("%s/kustomization.yaml: %v", dir, err)
		}
		for _, r := range k.Resources {
			p := filepath.Join(dir, r)
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			for _, part := range strings.Split(string(b), "\n---") {
				j, err := yaml.YAMLToJSON([]byte(part))
				if err != nil {
					t.Fatalf("%s: %v", p, err)
				}
				var meta struct {
					Kind string `json:"kind"`
				}
				if err := json.Unmarshal(j, &meta); err != nil || meta.Kind == "" {
					continue // comments only
				}
				docs = append(docs, doc{file: p, kind: meta.Kind, json: j})
			}
		}
	}
	return docs
}

// strict decodes d into v, refusing fields the type does not have.
func strict(d doc, v any) error {
	dec := json.NewDecoder(bytes.NewReader(d.json))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

// Every manifest decodes strictly into the official type of its kind.
func TestManifestsDecodeStrictly(t *testing.T) {
	kinds := map[string]int{}
	for _, d := range manifests(t) {
		var v any
		switch d.kind {
		case "Namespace":
			v = &corev1.Namespace{}
		case "ConfigMap":
			v = &corev1.ConfigMap{}
		case "Secret":
			v = &corev1.Secret{}
		case "ServiceAccount":
			v = &corev1.ServiceAccount{}
		case "Service":
			v = &corev1.Service{}
		case "Deployment":
			v = &appsv1.Deployment{}
		case "PodDisruptionBudget":
			v = &policyv1.PodDisruptionBudget{}
		case "ScaledObject":
			v = &kedav1alpha1.ScaledObject{}
		default:
			t.Errorf("%s: kind %s has no type in this test", d.file, d.kind)
			continue
		}
		if err := strict(d, v); err != nil {
			t.Errorf("%s: %s: %v", d.file, d.kind, err)
		}
		kinds[d.kind]++
	}
	if kinds["Deployment"] < 5 || kinds["Service"] < 1 || kinds["ScaledObject"] != 1 {
		t.Errorf("kinds %v: want the four services' and the gateway's Deployments, the gateway's Service and the ScaledObject", kinds)
	}
}

// Only ingest holds provider credentials: it alone reads the provider
// Secret, and it runs as a ServiceAccount that carries the workload
// identity annotation of each cloud (docs/protocol.md, "Models").
func TestIngestCloudCredentials(t *testing.T) {
	accounts := map[string]corev1.ServiceAccount{}
	var deployments []appsv1.Deployment
	for _, d := range manifests(t) {
		switch d.kind {
		case "ServiceAccount":
			var sa corev1.ServiceAccount
			if err := strict(d, &sa); err != nil {
				t.Fatal(err)
			}
			accounts[sa.Name] = sa
		case "Deployment":
			var dep appsv1.Deployment
			if err := strict(d, &dep); err != nil {
				t.Fatal(err)
			}
			deployments = append(deployments, dep)
		}
	}
	found := false
	for _, dep := range deployments {
		spec := dep.Spec.Template.Spec
		secret := false
		for _, c := range spec.Containers {
			for _, e := range c.EnvFrom {
				if e.SecretRef != nil && e.SecretRef.Name == "llmworker-providers" {
					secret = true
				}
			}
		}
		if dep.Name != "llmworker-ingest" {
			if secret {
				t.Errorf("%s reads the provider Secret: only ingest calls providers", dep.Name)
			}
			continue
		}
		found = true
		if !secret {
			t.Error("ingest does not read the provider Secret llmworker-providers")
		}
		sa, ok := accounts[spec.ServiceAccountName]
		if !ok || spec.ServiceAccountName == "" {
			t.Fatalf("ingest's serviceAccountName %q names no ServiceAccount of the manifests", spec.ServiceAccountName)
		}
		for _, a := range []string{"eks.amazonaws.com/role-arn", "iam.gke.io/gcp-service-account", "azure.workload.identity/client-id"} {
			if _, ok := sa.Annotations[a]; !ok {
				t.Errorf("ServiceAccount %s has no %s annotation", sa.Name, a)
			}
		}
	}
	if !found {
		t.Fatal("no llmworker-ingest Deployment")
	}
}

// buildCLI compiles cmd/llmworker.
func buildCLI(t *testing.T) string {
	t.Helper()
	return buildCommand(t, "llmworker")
}

// buildCommand compiles cmd/<name>, stripped (as deploy/build-images.sh
// builds it), which links in about half the time.
func buildCommand(t *testing.T, name string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), name)
	cmd := exec.Command("go", "build", "-ldflags=-s -w", "-o", bin, "./cmd/"+name)
	cmd.Dir = repo
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/%s: %v\n%s", name, err, out)
	}
	return bin
}

// imageCommand is the command an image of deploy/build-images.sh runs:
// <registry>/<name>:<tag> holds cmd/<name>.
func imageCommand(image string) string {
	name, _, _ := strings.Cut(image[strings.LastIndex(image, "/")+1:], ":")
	return name
}

// envNames are the variables a container sets: its env and the keys of
// the ConfigMaps it reads whole (a Secret's keys are not in the repo).
func envNames(t *testing.T, c corev1.Container) []string {
	t.Helper()
	var out []string
	for _, e := range c.EnvFrom {
		if e.ConfigMapRef != nil {
			for k := range configMap(t, e.ConfigMapRef.Name) {
				out = append(out, k)
			}
		}
	}
	for _, e := range c.Env {
		out = append(out, e.Name)
	}
	return out
}

// Every flag a container passes exists on the command its image runs,
// and every variable it sets is one that command reads: the args are
// parsed by the command itself (with --help appended, so it stops after
// parsing), and its help names each variable a flag defaults to.
func TestContainerArgsAreFlagsOfTheCommand(t *testing.T) {
	bins := map[string]string{}
	n := 0
	for _, d := range manifests(t) {
		if d.kind != "Deployment" {
			continue
		}
		var dep appsv1.Deployment
		if err := json.Unmarshal(d.json, &dep); err != nil {
			t.Fatal(err)
		}
		for _, c := range dep.Spec.Template.Spec.Containers {
			if !strings.HasPrefix(c.Image, "llmworker/") {
				continue
			}
			n++
			name := imageCommand(c.Image)
			if bins[name] == "" {
				bins[name] = buildCommand(t, name)
			}
			out, err := exec.Command(bins[name], append(slices.Clone(c.Args), "--help")...).CombinedOutput()
			if err != nil || strings.Contains(string(out), "not defined") {
				t.Errorf("%s: container %s: %s %s: %v\n%s", d.file, c.Name, name, strings.Join(c.Args, " "), err, out)
				continue
			}
			for _, v := range envNames(t, c) {
				if !strings.Contains(string(out), "($"+v+")") {
					t.Errorf("%s: container %s sets %s, which %s does not read (%s --help names no ($%s))", d.file, c.Name, v, name, name, v)
				}
			}
		}
	}
	if n < 5 {
		t.Fatalf("%d llmworker containers, want one per service and the gateway", n)
	}
	// The check can fail: a flag the command lacks is refused, and a
	// variable no flag reads is not in the help.
	bin := buildCLI(t)
	if out, err := exec.Command(bin, "up", "--services=toolexec", "--no-such-flag", "--help").CombinedOutput(); err == nil {
		t.Fatalf("an unknown flag passed:\n%s", out)
	}
	gw := bins["gateway"]
	if gw == "" {
		t.Fatal("no container runs the gateway image")
	}
	out, _ := exec.Command(gw, "--help").CombinedOutput()
	if !strings.Contains(string(out), "($LLMW_GATEWAY_TOKENS)") || strings.Contains(string(out), "($LLMW_NO_SUCH_VARIABLE)") {
		t.Fatalf("gateway --help does not name its variables as the check reads them:\n%s", out)
	}
}

// triggers are the nats-jetstream triggers of the ScaledObject.
func triggers(t *testing.T) []kedav1alpha1.ScaleTriggers {
	t.Helper()
	for _, d := range manifests(t) {
		if d.kind == "ScaledObject" {
			var so kedav1alpha1.ScaledObject
			if err := json.Unmarshal(d.json, &so); err != nil {
				t.Fatal(err)
			}
			return so.Spec.Triggers
		}
	}
	t.Fatal("no ScaledObject")
	return nil
}

// jsz reads the monitoring endpoint as KEDA's nats-jetstream scaler does
// (/jsz?acc=<account>&consumers=true&config=true) and returns each
// consumer's lag as the scaler computes it: num_pending + num_ack_pending.
func jsz(t *testing.T, monitor, account, stream string) map[string]int {
	t.Helper()
	q := url.Values{"acc": {account}, "consumers": {"true"}, "config": {"true"}}
	resp, err := http.Get("http://" + monitor + "/jsz?" + q.Encode())
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var out struct {
		AccountDetails []struct {
			Name    string `json:"name"`
			Streams []struct {
				Name      string `json:"name"`
				Consumers []struct {
					Name          string `json:"name"`
					NumPending    int    `json:"num_pending"`
					NumAckPending int    `json:"num_ack_pending"`
				} `json:"consumer_detail"`
			} `json:"stream_detail"`
		} `json:"account_details"`
	}
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("/jsz: %v: %s", err, b)
	}
	lag := map[string]int{}
	for _, a := range out.AccountDetails {
		for _, s := range a.Streams {
			if s.Name != stream {
				continue
			}
			for _, c := range s.Consumers {
				lag[c.Name] = c.NumPending + c.NumAckPending
			}
		}
	}
	return lag
}

// The KEDA triggers name the stream, the consumers and the account that
// toolexec creates (read from a running toolexec, not from constants), and
// the monitoring endpoint KEDA reads reports calls nobody takes as lag.
func TestKEDATriggersMatchToolexec(t *testing.T) {
	srv, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, HTTPHost: "127.0.0.1", HTTPPort: -1,
		JetStream: true, StoreDir: t.TempDir(), NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	go srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server not ready")
	}
	t.Cleanup(srv.Shutdown)
	monitor := srv.MonitorAddr().String()

	// toolexec as the Deployment runs it, against this server.
	bin := buildCLI(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	tx := exec.CommandContext(ctx, bin, "up", "--services=toolexec", "--log-level=error")
	tx.Env = append(os.Environ(), "NATS_URL="+srv.ClientURL())
	var logs bytes.Buffer
	tx.Stdout, tx.Stderr = &logs, &logs
	if err := tx.Start(); err != nil {
		t.Fatal(err)
	}
	trig := triggers(t)
	if len(trig) == 0 {
		t.Fatal("no triggers")
	}
	var consumers []string
	for _, tr := range trig {
		md := tr.Metadata
		if tr.Type != "nats-jetstream" || md["stream"] != events.StreamToolCalls {
			t.Errorf("trigger %s on stream %q, want nats-jetstream on %s", tr.Type, md["stream"], events.StreamToolCalls)
		}
		consumers = append(consumers, md["consumer"])
	}
	account := trig[0].Metadata["account"]
	var lag map[string]int
	defer func() {
		if t.Failed() {
			t.Logf("account %q, stream %s: consumers %v, the triggers name %v (toolexec log:\n%s)", account, events.StreamToolCalls, lag, consumers, logs.String())
		}
	}()
	poll.Until(t, time.Minute, "the consumers the triggers name", func() bool {
		lag = jsz(t, monitor, account, events.StreamToolCalls)
		return !slices.ContainsFunc(consumers, func(c string) bool { _, ok := lag[c]; return !ok })
	})
	for _, c := range consumers {
		tool := strings.TrimPrefix(c, "tool_")
		if toolexec.ConsumerName(tool) != c {
			t.Errorf("trigger consumer %s is not toolexec's consumer of %s (%s)", c, tool, toolexec.ConsumerName(tool))
		}
	}

	// No toolexec running: calls queue up, and KEDA sees them as lag.
	_ = tx.Process.Signal(syscall.SIGTERM)
	if err := tx.Wait(); err != nil {
		t.Fatalf("toolexec did not drain cleanly: %v\n%s", err, logs.String())
	}
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	tool := strings.TrimPrefix(consumers[0], "tool_")
	const queued = 7
	subj := events.NewSubjects("").ToolCall(tool)
	for i := range queued {
		m := nats.NewMsg(subj)
		m.Data = []byte(fmt.Sprintf(`{"call_id":"c%d","turn_id":"t1","name":%q,"input":{}}`, i, tool))
		if _, err := jsPublish(nc, m); err != nil {
			t.Fatal(err)
		}
	}
	// The server counts a consumer's pending messages a moment after it
	// stored them (the consumer's own goroutine): poll, as KEDA does.
	got := 0
	poll.Until(t, 10*time.Second, fmt.Sprintf("the lag of %s to be the %d queued calls", consumers[0], queued), func() bool {
		got = jsz(t, monitor, account, events.StreamToolCalls)[consumers[0]]
		return got == queued
	})
}

// jsPublish publishes m and waits for JetStream's acknowledgement.
func jsPublish(nc *nats.Conn, m *nats.Msg) (*nats.Msg, error) {
	r, err := nc.RequestMsg(m, 5*time.Second)
	if err != nil {
		return nil, err
	}
	if bytes.Contains(r.Data, []byte(`"error"`)) {
		return nil, errors.New(string(r.Data))
	}
	return r, nil
}

// kubectl kustomize renders both kustomizations (CI installs kubectl).
func TestKustomizeRenders(t *testing.T) {
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("kubectl is not installed: .ci/run installs Debian's kubernetes-client")
		}
		t.Skip("kubectl is not installed")
	}
	for _, dir := range []string{"..", filepath.Join("..", "keda")} {
		out, err := exec.Command(kubectl, "kustomize", dir).CombinedOutput()
		if err != nil || !bytes.Contains(out, []byte("kind:")) {
			t.Errorf("kubectl kustomize %s: %v\n%s", dir, err, out)
		}
	}
}
