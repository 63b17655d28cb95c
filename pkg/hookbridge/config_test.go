package hookbridge_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/hook/hooknats"
	"github.com/llmworker/llmworker/pkg/hookbridge"
)

// An invalid config is refused with the line and the field that are
// wrong. Lines are counted in the YAML text below (line 1 = "hooks:").
func TestConfigErrorsNameLineAndField(t *testing.T) {
	cases := []struct {
		name, yml string
		line      int
		field     string
		problem   string
	}{
		{"unknown top-level", "hooks: []\nextra: 1\n", 2, "extra", "unknown field"},
		{"hooks not a list", "hooks: {}\n", 1, "hooks", "must be a list"},
		{"missing name", "hooks:\n  - event: on_abort\n    http: {url: http://x}\n", 2, "hooks[0].name", "is required"},
		{"bad name", "hooks:\n  - name: has space\n    event: on_abort\n    http: {url: http://x}\n", 2, "hooks[0].name", "subject token"},
		{"bad event", "hooks:\n  - name: a\n    event: before_everything\n    http: {url: http://x}\n", 3, "hooks[0].event", "must be on_message_send"},
		{"bad matcher", "hooks:\n  - name: a\n    event: on_abort\n    matcher: '(unclosed'\n    http: {url: http://x}\n", 4, "hooks[0].matcher", "regular expression"},
		{"bad priority", "hooks:\n  - name: a\n    event: on_abort\n    priority: high\n    http: {url: http://x}\n", 4, "hooks[0].priority", "integer"},
		{"bad timeout", "hooks:\n  - name: a\n    event: on_abort\n    timeout: 5\n    http: {url: http://x}\n", 4, "hooks[0].timeout", "duration"},
		{"bad failure", "hooks:\n  - name: a\n    event: on_abort\n    failure: fail_sometimes\n    http: {url: http://x}\n", 4, "hooks[0].failure", "fail_closed or fail_open"},
		{"unknown hook field", "hooks:\n  - name: a\n    evnt: on_abort\n", 3, "hooks[0].evnt", "unknown field"},
		{"no kind", "hooks:\n  - name: a\n    event: on_abort\n", 2, "hooks[0]", "needs one of builtin, command or http"},
		{"two kinds", "hooks:\n  - name: a\n    event: on_abort\n    http: {url: http://x}\n    command: {argv: [ls]}\n", 5, "hooks[0].command", "only one of"},
		{"duplicate name", "hooks:\n  - name: a\n    event: on_abort\n    http: {url: http://x}\n  - name: a\n    event: on_abort\n    http: {url: http://y}\n", 5, "hooks[1].name", "already the name of hooks[0]"},
		{"builtin without type", "hooks:\n  - name: a\n    builtin: {pattern: x}\n", 3, "hooks[0].builtin.type", "is required"},
		{"unknown builtin", "hooks:\n  - name: a\n    builtin:\n      type: teleport\n", 4, "hooks[0].builtin.type", "unknown builtin"},
		{"builtin wrong event", "hooks:\n  - name: a\n    event: on_turn_end\n    builtin: {type: deny_tools, pattern: x}\n", 3, "hooks[0].event", "runs at before_tool_call"},
		{"deny bad pattern", "hooks:\n  - name: a\n    builtin:\n      type: deny_tools\n      pattern: '[z-a]'\n", 5, "hooks[0].builtin.pattern", "regular expression"},
		{"deny unknown field", "hooks:\n  - name: a\n    builtin:\n      type: deny_tools\n      pattern: x\n      reasn: y\n", 6, "hooks[0].builtin.reasn", "unknown field"},
		{"limit negative", "hooks:\n  - name: a\n    builtin:\n      type: limit_tool_calls\n      max: -1\n", 5, "hooks[0].builtin.max", "negative"},
		{"mask bad preset", "hooks:\n  - name: a\n    builtin:\n      type: mask_result\n      presets: [emails, phones]\n", 5, "hooks[0].builtin.presets[1]", "unknown preset"},
		{"mask bad regex", "hooks:\n  - name: a\n    builtin:\n      type: mask_result\n      patterns:\n        - regex: '*'\n", 6, "hooks[0].builtin.patterns[0].regex", "regular expression"},
		{"inject bad role", "hooks:\n  - name: a\n    builtin:\n      type: inject_message\n      text: hi\n      role: system\n", 6, "hooks[0].builtin.role", "user or assistant"},
		{"inject bad zone", "hooks:\n  - name: a\n    builtin:\n      type: inject_message\n      text: hi\n      timezone: Mars/Olympus\n", 6, "hooks[0].builtin.timezone", "time zone"},
		{"schema does not compile", "hooks:\n  - name: a\n    builtin:\n      type: validate_json\n      schema: {type: 12}\n", 5, "hooks[0].builtin.schema", "schema"},
		{"rewrite empty", "hooks:\n  - name: a\n    builtin:\n      type: rewrite_input\n", 4, "hooks[0].builtin", "needs set or delete"},
		{"rewrite bad path", "hooks:\n  - name: a\n    builtin:\n      type: rewrite_input\n      set: {'a..b': 1}\n", 5, "hooks[0].builtin.set.a..b", "field path"},
		{"command missing program", "hooks:\n  - name: a\n    event: on_abort\n    command:\n      argv: [/no/such/program-xyz]\n", 5, "hooks[0].command.argv", "not found"},
		{"command both", "hooks:\n  - name: a\n    event: on_abort\n    command:\n      argv: [ls]\n      shell: ls\n", 6, "hooks[0].command.shell", "not both"},
		{"command without event", "hooks:\n  - name: a\n    command: {shell: ls}\n", 3, "hooks[0].event", "required for command hooks"},
		{"http bad url", "hooks:\n  - name: a\n    event: on_abort\n    http:\n      url: ftp://x\n", 5, "hooks[0].http.url", "http:// or https://"},
		{"yaml syntax", "hooks:\n  - name: a\n    event: \"x\n", 3, "", "YAML syntax"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := hookbridge.ParseConfig("hooks.yaml", []byte(tc.yml), hookbridge.ParseOptions{})
			var ce *hookbridge.ConfigError
			if !errors.As(err, &ce) || !errors.Is(err, hookbridge.ErrConfig) {
				t.Fatalf("error %v, want a ConfigError", err)
			}
			if ce.Line != tc.line || ce.Field != tc.field || !strings.Contains(ce.Problem, tc.problem) {
				t.Errorf("got line %d field %q problem %q\nwant line %d field %q problem containing %q", ce.Line, ce.Field, ce.Problem, tc.line, tc.field, tc.problem)
			}
			if !strings.HasPrefix(err.Error(), "hooks.yaml:") {
				t.Errorf("message %q does not start with the file name", err)
			}
		})
	}
}

// The shipped example config is valid and lists every hook kind.
func TestExampleConfig(t *testing.T) {
	f, err := hookbridge.LoadConfig(filepath.Join("..", "..", "deploy", "hooks.example.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, h := range f.Hooks {
		got = append(got, h.Registration.Name+"@"+string(h.Registration.Event))
	}
	want := []string{
		"current-date@on_message_send", "no-shell@before_tool_call", "approve-writes@before_tool_call",
		"safe-search@before_tool_call", "tool-budget@before_tool_call", "mask-secrets@after_tool_call",
		"answer-schema@on_turn_end", "audit-tool-calls@after_tool_call", "no-force-push@before_tool_call",
		"policy-service@before_tool_call", "notify-abort@on_abort",
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("hooks\n%v\nwant\n%v", got, want)
	}
	// deny_tools defaults its matcher to the pattern.
	if f.Hooks[1].Registration.Matcher != "^(shell|bash|exec|run_command)$" || f.Hooks[1].Registration.Priority != -10 {
		t.Errorf("no-shell registration %+v", f.Hooks[1].Registration)
	}
}

// The hooks of compose's hooks profile run in the FROM scratch image, which
// holds no binary a command hook could run: built-in and HTTP hooks only.
func TestComposeConfigNeedsNoBinary(t *testing.T) {
	p := filepath.Join("..", "..", "deploy", "hooks.compose.yaml")
	f, err := hookbridge.LoadConfig(p)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Hooks) == 0 {
		t.Fatal("no hooks")
	}
	var raw struct {
		Hooks []map[string]any `yaml:"hooks"`
	}
	b, _ := os.ReadFile(p)
	if err := yaml.Unmarshal(b, &raw); err != nil {
		t.Fatal(err)
	}
	for _, h := range raw.Hooks {
		if _, ok := h["command"]; ok {
			t.Errorf("hook %v is a command hook: the hookbridge image cannot run it", h["name"])
		}
	}
}

// schema_file is read relative to the config file, JSON or YAML.
func TestConfigSchemaFile(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "answer.yaml"), []byte("type: object\nrequired: [ok]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := hookbridge.ParseConfig(filepath.Join(dir, "hooks.yaml"), []byte("hooks:\n  - name: v\n    builtin: {type: validate_json, schema_file: answer.yaml}\n"), hookbridge.ParseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := f.Hooks[0].Handler.ServeHook(ctx(t), &events.HookRequest{Event: events.HookOnTurnEnd, Messages: []events.Message{events.AssistantText(`{"no":1}`)}})
	if err != nil || resp == nil || resp.Result != events.HookContinueWithMessages || !strings.Contains(resp.Reason, "ok") {
		t.Errorf("resp %+v err %v", resp, err)
	}
	_, err = hookbridge.ParseConfig(filepath.Join(dir, "hooks.yaml"), []byte("hooks:\n  - name: v\n    builtin: {type: validate_json, schema_file: missing.json}\n"), hookbridge.ParseOptions{})
	var ce *hookbridge.ConfigError
	if !errors.As(err, &ce) || ce.Line != 3 || ce.Field != "hooks[0].builtin.schema_file" {
		t.Errorf("missing schema file: %v", err)
	}
}

func FuzzParseConfig(f *testing.F) {
	b, _ := os.ReadFile(filepath.Join("..", "..", "deploy", "hooks.example.yaml"))
	f.Add(string(b))
	f.Add("hooks:\n  - name: a\n    builtin: {type: deny_tools, pattern: x}\n")
	f.Add("hooks: [")
	f.Add("")
	f.Fuzz(func(t *testing.T, s string) {
		fl, err := hookbridge.ParseConfig("fuzz.yaml", []byte(s), hookbridge.ParseOptions{})
		if err != nil {
			if !errors.Is(err, hookbridge.ErrConfig) {
				t.Fatalf("error %v is not a ConfigError", err)
			}
			return
		}
		for _, h := range fl.Hooks {
			if h.Registration.Event == "" || h.Handler == nil {
				t.Fatalf("hook without event or handler: %+v", h)
			}
			if _, err := json.Marshal(h.Registration); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// FuzzDecodeRequest: any request body decodes to a valid request or an
// events.ErrInvalid error, never a panic.
func FuzzDecodeRequest(f *testing.F) {
	f.Add([]byte(`{"event":"before_tool_call","turn_id":"t","tool_call":{"id":"c","name":"x","input":{}}}`))
	f.Add([]byte(`{"specversion":"1.0","id":"1","source":"/x","type":"llmw.hook.request","data":{"event":"on_abort","turn_id":"t"}}`))
	f.Add([]byte(`{"event":"after_tool_call","turn_id":"t"}`))
	f.Add([]byte(`nope`))
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := hooknats.DecodeRequest(nil, body)
		if err != nil {
			if !errors.Is(err, events.ErrInvalid) && !errors.Is(err, events.ErrNotCloudEvent) {
				t.Fatalf("error %v", err)
			}
			return
		}
		if err := req.Validate(); err != nil {
			t.Fatalf("accepted an invalid request: %v", err)
		}
	})
}
