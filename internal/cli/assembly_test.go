package cli

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/llmworker/llmworker/internal/service"
	"github.com/llmworker/llmworker/internal/service/gatewaysvc"
	"github.com/llmworker/llmworker/internal/service/hookbridgesvc"
	"github.com/llmworker/llmworker/internal/service/ingestsvc"
	"github.com/llmworker/llmworker/internal/service/toolexecsvc"
	"github.com/llmworker/llmworker/internal/service/turnsvc"
)

func commandServices() []service.Service {
	return []service.Service{&ingestsvc.Service{}, &toolexecsvc.Service{}, &hookbridgesvc.Service{}, &turnsvc.Service{}, &gatewaysvc.Service{}}
}

// Every flag of every service's own command is a flag of `llmworker up`
// too, as --<flag> and (for the service's own flags) --<service>-<flag>,
// so a deployment that runs `up --services=X` can tune what cmd/X can.
// The lists come from the flag sets themselves.
func TestUpHasEveryServiceFlag(t *testing.T) {
	up := newUpOptions(&Env{Getenv: envOf()}).fs
	shared, _, _ := service.CommandFlags(&noFlags{}, envOf())
	for _, svc := range commandServices() {
		fs, _, _ := service.CommandFlags(svc, envOf())
		fs.VisitAll(func(f *flag.Flag) {
			if up.Lookup(f.Name) == nil {
				t.Errorf("%s --%s is not an up flag", svc.Name(), f.Name)
			}
			if shared.Lookup(f.Name) == nil && up.Lookup(svc.Name()+"-"+f.Name) == nil {
				t.Errorf("%s --%s has no up flag --%s-%s", svc.Name(), f.Name, svc.Name(), f.Name)
			}
		})
	}
}

// noFlags is a service with only the shared flags.
type noFlags struct{ service.Service }

func (noFlags) Name() string         { return "none" }
func (noFlags) About() string        { return "" }
func (noFlags) Flags(*service.Flags) {}

// Every flag the deployment files pass exists on the command they run:
// the Kubernetes manifests run `llmworker up`, the compose file each
// service's image (and `up` for the all-in-one).
func TestDeployFlagsExist(t *testing.T) {
	commands := map[string]*flag.FlagSet{"up": newUpOptions(&Env{Getenv: envOf()}).fs}
	for _, svc := range commandServices() {
		commands[svc.Name()], _, _ = service.CommandFlags(svc, envOf())
	}
	check := func(where string, fs *flag.FlagSet, args []string) {
		for _, a := range args {
			if !strings.HasPrefix(a, "-") {
				continue
			}
			name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
			if fs.Lookup(name) == nil {
				t.Errorf("%s: flag --%s does not exist on %s", where, name, fs.Name())
			}
		}
	}
	root := filepath.Join("..", "..", "deploy")
	manifests, _ := filepath.Glob(filepath.Join(root, "k8s", "*.yaml"))
	seen := 0
	for _, p := range manifests {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		dec := yaml.NewDecoder(strings.NewReader(string(b)))
		for {
			var doc struct {
				Spec struct {
					Template struct {
						Spec struct {
							Containers []struct {
								Args []string `yaml:"args"`
							} `yaml:"containers"`
						} `yaml:"spec"`
					} `yaml:"template"`
				} `yaml:"spec"`
			}
			if dec.Decode(&doc) != nil {
				break
			}
			for _, c := range doc.Spec.Template.Spec.Containers {
				if len(c.Args) > 0 && c.Args[0] == "up" {
					check(p, commands["up"], c.Args[1:])
					seen++
				}
			}
		}
	}
	b, err := os.ReadFile(filepath.Join(root, "compose.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var compose struct {
		Services map[string]struct {
			Image   string   `yaml:"image"`
			Command []string `yaml:"command"`
		} `yaml:"services"`
	}
	if err := yaml.Unmarshal(b, &compose); err != nil {
		t.Fatal(err)
	}
	for name, s := range compose.Services {
		img := s.Image[strings.LastIndex(s.Image, "/")+1:]
		img, _, _ = strings.Cut(img, ":")
		cmd := img
		args := s.Command
		if img == "llmworker" && len(args) > 0 {
			cmd, args = args[0], args[1:]
		}
		if fs, ok := commands[cmd]; ok {
			check("compose service "+name, fs, args)
			seen++
		}
	}
	if seen < 5 {
		t.Errorf("checked %d commands only: did the deployment files move?", seen)
	}
}
