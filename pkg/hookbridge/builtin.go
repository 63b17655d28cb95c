package hookbridge

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/tool"
)

// Built-in hooks. Each is a Handler usable in Go code and, by its type
// name, in a config file's builtin: block.

// DenyTools skips every call whose tool name matches pattern
// (before_tool_call); the model reads reason (default "tool <name> is not
// allowed") as the error result.
func DenyTools(pattern *regexp.Regexp, reason string) Handler {
	return HandlerFunc(func(_ context.Context, req *events.HookRequest) (*events.HookResponse, error) {
		if req.ToolCall == nil || !pattern.MatchString(req.ToolCall.Name) {
			return nil, nil
		}
		r := reason
		if r == "" {
			r = fmt.Sprintf("tool %s is not allowed", req.ToolCall.Name)
		}
		return Respond(events.HookSkip, r), nil
	})
}

// RequireApproval pauses the turn before every call whose tool name matches
// pattern (before_tool_call), until a resume approves, edits or denies it.
func RequireApproval(pattern *regexp.Regexp, reason string) Handler {
	return HandlerFunc(func(_ context.Context, req *events.HookRequest) (*events.HookResponse, error) {
		if req.ToolCall == nil || !pattern.MatchString(req.ToolCall.Name) {
			return nil, nil
		}
		r := reason
		if r == "" {
			r = fmt.Sprintf("tool %s needs approval", req.ToolCall.Name)
		}
		return Respond(events.HookPause, r), nil
	})
}

// RewriteInput sets and deletes fields of a call's input
// (before_tool_call). Paths are dot-separated object keys, with numbers
// indexing arrays: "options.limit", "items.0.id". Set creates missing
// objects on the way; deleting a missing field does nothing. An input that
// is not a JSON object, or a set through a value that is neither an object
// nor an array, fails the hook.
func RewriteInput(set map[string]json.RawMessage, del []string) Handler {
	return HandlerFunc(func(_ context.Context, req *events.HookRequest) (*events.HookResponse, error) {
		if req.ToolCall == nil {
			return nil, nil
		}
		in, err := rewrite(req.ToolCall.Input, set, del)
		if err != nil {
			return nil, err
		}
		call := *req.ToolCall
		call.Input = in
		return &events.HookResponse{Result: events.HookContinue, ToolCall: &call}, nil
	})
}

// MaskRule replaces every match of Regexp in a tool result with
// Replacement (which may use $1 for submatches).
type MaskRule struct {
	Regexp      *regexp.Regexp
	Replacement string
}

// DefaultMask is the replacement text of mask_result.
const DefaultMask = "[REDACTED]"

// MaskPreset returns the rules of a named preset, replacing with repl:
// "emails" (e-mail addresses) and "secrets" (API keys of common providers,
// bearer tokens, private key blocks, and password/secret/token/api_key
// assignments, whose name is kept).
func MaskPreset(name, repl string) ([]MaskRule, bool) {
	lit := strings.ReplaceAll(repl, "$", "$$")
	switch name {
	case "emails":
		return []MaskRule{{regexp.MustCompile(`[A-Za-z0-9._%+\-]+@[A-Za-z0-9\-]+(?:\.[A-Za-z0-9\-]+)*\.[A-Za-z]{2,}`), lit}}, true
	case "secrets":
		return []MaskRule{
			{regexp.MustCompile(`-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z ]*PRIVATE KEY-----`), lit},
			{regexp.MustCompile(`\b(?:AKIA|ASIA)[0-9A-Z]{16}\b`), lit},
			{regexp.MustCompile(`\bsk-(?:ant-|proj-)?[A-Za-z0-9_\-]{20,}`), lit},
			{regexp.MustCompile(`\bgh[pousr]_[A-Za-z0-9]{36,}\b`), lit},
			{regexp.MustCompile(`\bxox[abpors]-[A-Za-z0-9\-]{10,}`), lit},
			{regexp.MustCompile(`\bAIza[0-9A-Za-z_\-]{35}\b`), lit},
			{regexp.MustCompile(`(?i)\b(bearer\s+)[A-Za-z0-9._~+/=\-]{16,}`), "${1}" + lit},
			{regexp.MustCompile(`(?i)\b((?:password|passwd|pwd|secret|api[_-]?key|access[_-]?token|auth[_-]?token|token)"?\s*[:=]\s*)("[^"]*"|'[^']*'|[^\s,;]+)`), "${1}" + lit},
		}, true
	}
	return nil, false
}

// MaskResult applies rules to the content of tool results
// (after_tool_call); a changed result replaces the original.
func MaskResult(rules []MaskRule) Handler {
	return HandlerFunc(func(_ context.Context, req *events.HookRequest) (*events.HookResponse, error) {
		if req.ToolResult == nil {
			return nil, nil
		}
		s := req.ToolResult.Content
		for _, r := range rules {
			s = r.Regexp.ReplaceAllString(s, r.Replacement)
		}
		if s == req.ToolResult.Content {
			return nil, nil
		}
		res := *req.ToolResult
		res.Content = s
		return &events.HookResponse{Result: events.HookContinue, ToolResult: &res}, nil
	})
}

// InjectOptions configure InjectMessage.
type InjectOptions struct {
	// Text may contain {{date}} (2006-01-02), {{time}} (RFC 3339),
	// {{weekday}}, {{turn_id}}, {{session_id}}, {{step}} and {{var:NAME}}
	// (a turn variable); nothing else is expanded.
	Text string
	// Role of the message: user (default) or assistant.
	Role events.Role
	// AtEnd appends the message; by default it goes first.
	AtEnd bool
	// Now and Location are the clock ("" / nil = time.Now, local time).
	Now      func() time.Time
	Location *time.Location
}

// InjectMessage adds a message to the context sent to the model
// (on_message_send), e.g. "Current date: {{date}}". It is added to each
// request, not to the transcript.
func InjectMessage(o InjectOptions) Handler {
	if o.Role == "" {
		o.Role = events.RoleUser
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return HandlerFunc(func(_ context.Context, req *events.HookRequest) (*events.HookResponse, error) {
		now := o.Now()
		if o.Location != nil {
			now = now.In(o.Location)
		}
		text := expand(o.Text, now, req)
		msg := events.Message{Role: o.Role, Content: []events.Part{events.TextPart(text)}}
		msgs := make([]events.Message, 0, len(req.Messages)+1)
		if o.AtEnd {
			msgs = append(append(msgs, req.Messages...), msg)
		} else {
			msgs = append(append(msgs, msg), req.Messages...)
		}
		return &events.HookResponse{Result: events.HookContinue, Messages: msgs}, nil
	})
}

var placeholderRE = regexp.MustCompile(`\{\{\s*([a-z_]+)(?::([^}\s]+))?\s*\}\}`)

func expand(text string, now time.Time, req *events.HookRequest) string {
	return placeholderRE.ReplaceAllStringFunc(text, func(m string) string {
		sub := placeholderRE.FindStringSubmatch(m)
		switch sub[1] {
		case "date":
			return now.Format("2006-01-02")
		case "time":
			return now.Format(time.RFC3339)
		case "weekday":
			return now.Weekday().String()
		case "turn_id":
			return req.TurnID
		case "session_id":
			return req.SessionID
		case "step":
			return strconv.Itoa(req.Step)
		case "var":
			return req.Variables[sub[2]]
		}
		return m
	})
}

// ValidateOptions configure ValidateJSON.
type ValidateOptions struct {
	// Schema, if set, is a JSON Schema the answer must satisfy; otherwise
	// any JSON value passes.
	Schema json.RawMessage
	// Message asks the model to fix its answer; {{error}} is replaced by
	// what is wrong. "" = DefaultFixMessage.
	Message string
	// KeepCodeFence validates the text as is; by default one surrounding
	// ``` or ```json fence is removed first (models like to add it).
	KeepCodeFence bool
}

// DefaultFixMessage is the message ValidateJSON sends by default.
const DefaultFixMessage = "Your final answer is not valid: {{error}}. Reply again with only the corrected JSON, without any other text."

// ValidateJSON checks the last assistant message as JSON (and against a
// schema) at on_turn_end; when it does not pass it answers
// continue_with_messages with a user message saying what is wrong, so the
// model fixes it (the worker bounds the retries by max_turn_end_retries).
// Errors match ErrInvalidHook for a schema that does not compile.
func ValidateJSON(o ValidateOptions) (Handler, error) {
	var v *tool.Validator
	if len(o.Schema) > 0 {
		var err error
		if v, err = tool.NewValidator(o.Schema); err != nil {
			return nil, fmt.Errorf("%w: schema: %w", ErrInvalidHook, err)
		}
	}
	msg := o.Message
	if msg == "" {
		msg = DefaultFixMessage
	}
	return HandlerFunc(func(_ context.Context, req *events.HookRequest) (*events.HookResponse, error) {
		text, ok := lastAssistantText(req.Messages)
		if !ok {
			return nil, nil
		}
		if !o.KeepCodeFence {
			text = stripFence(text)
		}
		var problem string
		if !json.Valid([]byte(text)) {
			problem = "it is not JSON (" + jsonSyntaxProblem(text) + ")"
		} else if v != nil {
			if err := v.Validate(json.RawMessage(text)); err != nil {
				problem = "it does not match the JSON Schema: " + err.Error()
			}
		}
		if problem == "" {
			return nil, nil
		}
		fix := strings.ReplaceAll(msg, "{{error}}", problem)
		return &events.HookResponse{
			Result: events.HookContinueWithMessages, Reason: problem,
			Messages: []events.Message{events.UserText(fix)},
		}, nil
	}), nil
}

func lastAssistantText(msgs []events.Message) (string, bool) {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == events.RoleAssistant {
			return msgs[i].Text(), true
		}
	}
	return "", false
}

var fenceRE = regexp.MustCompile("(?s)^\\s*```[A-Za-z0-9_-]*[ \\t]*\\r?\\n(.*?)\\r?\\n?```\\s*$")

func stripFence(s string) string {
	if m := fenceRE.FindStringSubmatch(s); m != nil {
		return m[1]
	}
	return s
}

func jsonSyntaxProblem(s string) string {
	var v any
	err := json.Unmarshal([]byte(s), &v)
	var se *json.SyntaxError
	switch {
	case strings.TrimSpace(s) == "":
		return "the answer is empty"
	case errors.As(err, &se):
		return fmt.Sprintf("%v at byte %d", se, se.Offset)
	case err != nil:
		return err.Error()
	}
	return "invalid"
}

// LimitToolCalls allows at most max calls per turn (of the tools the hook's
// matcher selects) and skips the calls beyond it with reason (default
// "tool call limit of N per turn reached"). The count lives in the turn
// variable "tool_calls:<name>", so it survives pauses and replicas.
func LimitToolCalls(name string, max int, reason string) Handler {
	key := "tool_calls:" + name
	return HandlerFunc(func(_ context.Context, req *events.HookRequest) (*events.HookResponse, error) {
		n, _ := strconv.Atoi(req.Variables[key])
		if n >= max {
			r := reason
			if r == "" {
				r = fmt.Sprintf("tool call limit of %d per turn reached", max)
			}
			return Respond(events.HookSkip, r), nil
		}
		return &events.HookResponse{Result: events.HookContinue, Variables: map[string]string{key: strconv.Itoa(n + 1)}}, nil
	})
}

// rewrite applies set and del to a JSON object.
func rewrite(input json.RawMessage, set map[string]json.RawMessage, del []string) (json.RawMessage, error) {
	var root any = map[string]any{}
	if b := bytes.TrimSpace(input); len(b) > 0 && string(b) != "null" {
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.UseNumber()
		if err := dec.Decode(&root); err != nil {
			return nil, fmt.Errorf("tool input is not JSON: %w", err)
		}
	}
	if _, ok := root.(map[string]any); !ok {
		return nil, fmt.Errorf("tool input is not a JSON object")
	}
	for _, p := range del {
		deletePath(root, strings.Split(p, "."))
	}
	// Apply sets in a stable order (sorted paths) so the result does not
	// depend on map iteration.
	paths := make([]string, 0, len(set))
	for p := range set {
		paths = append(paths, p)
	}
	sortStrings(paths)
	for _, p := range paths {
		var v any
		dec := json.NewDecoder(bytes.NewReader(set[p]))
		dec.UseNumber()
		if err := dec.Decode(&v); err != nil {
			return nil, fmt.Errorf("set %s: %w", p, err)
		}
		var err error
		if root, err = setPath(root, strings.Split(p, "."), v); err != nil {
			return nil, fmt.Errorf("set %s: %w", p, err)
		}
	}
	return json.Marshal(root)
}

func sortStrings(s []string) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}

func setPath(node any, path []string, v any) (any, error) {
	if len(path) == 0 {
		return v, nil
	}
	switch n := node.(type) {
	case map[string]any:
		child, ok := n[path[0]]
		if !ok && len(path) > 1 {
			child = map[string]any{}
		}
		c, err := setPath(child, path[1:], v)
		if err != nil {
			return nil, err
		}
		n[path[0]] = c
		return n, nil
	case []any:
		i, err := strconv.Atoi(path[0])
		if err != nil || i < 0 || i >= len(n) {
			return nil, fmt.Errorf("%q is not an index of an array of %d", path[0], len(n))
		}
		c, err := setPath(n[i], path[1:], v)
		if err != nil {
			return nil, err
		}
		n[i] = c
		return n, nil
	}
	return nil, fmt.Errorf("cannot set %q inside a value that is neither an object nor an array", path[0])
}

func deletePath(node any, path []string) {
	switch n := node.(type) {
	case map[string]any:
		if len(path) == 1 {
			delete(n, path[0])
			return
		}
		deletePath(n[path[0]], path[1:])
	case []any:
		i, err := strconv.Atoi(path[0])
		if err != nil || i < 0 || i >= len(n) {
			return
		}
		if len(path) == 1 {
			return // removing array elements would shift the others: not supported
		}
		deletePath(n[i], path[1:])
	}
}

// builtinEvents is the hook point of each builtin type.
var builtinEvents = map[string]events.HookEvent{
	"deny_tools":       events.HookBeforeToolCall,
	"require_approval": events.HookBeforeToolCall,
	"rewrite_input":    events.HookBeforeToolCall,
	"limit_tool_calls": events.HookBeforeToolCall,
	"mask_result":      events.HookAfterToolCall,
	"inject_message":   events.HookOnMessageSend,
	"validate_json":    events.HookOnTurnEnd,
}

var builtinTypes = []string{"deny_tools", "require_approval", "rewrite_input", "limit_tool_calls", "mask_result", "inject_message", "validate_json"}

// builtin parses a builtin: block.
func (d *decoder) builtin(n *yaml.Node, path string, reg *events.HookRegistration, eventNode *yaml.Node) (Handler, error) {
	if n.Kind != yaml.MappingNode {
		return nil, d.errAt(n, path, "must be a mapping with a type")
	}
	var typ string
	var typN *yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == "type" {
			typN = n.Content[i+1]
		}
	}
	if typN == nil {
		return nil, d.errAt(n, path+".type", "is required (one of %s)", list(builtinTypes))
	}
	typ, err := d.str(typN, path+".type")
	if err != nil {
		return nil, err
	}
	ev, ok := builtinEvents[typ]
	if !ok {
		return nil, d.errAt(typN, path+".type", "unknown builtin %q (one of %s)", typ, list(builtinTypes))
	}
	if reg.Event == "" {
		reg.Event = ev
	} else if reg.Event != ev {
		return nil, d.errAt(eventNode, strings.TrimSuffix(path, ".builtin")+".event", "builtin %s runs at %s, not %s", typ, ev, reg.Event)
	}
	f := func(name string) string { return path + "." + name }
	switch typ {
	case "deny_tools", "require_approval":
		m, err := d.mapping(n, path, "type", "pattern", "reason")
		if err != nil {
			return nil, err
		}
		pn, ok := m["pattern"]
		if !ok {
			return nil, d.errAt(n, f("pattern"), "is required: a regular expression on the tool name")
		}
		re, err := d.regexp(pn, f("pattern"))
		if err != nil {
			return nil, err
		}
		var reason string
		if v, ok := m["reason"]; ok {
			if reason, err = d.str(v, f("reason")); err != nil {
				return nil, err
			}
		}
		if reg.Matcher == "" {
			// Only matching calls need a round trip to the bridge.
			reg.Matcher = re.String()
		}
		if typ == "deny_tools" {
			return DenyTools(re, reason), nil
		}
		return RequireApproval(re, reason), nil

	case "rewrite_input":
		m, err := d.mapping(n, path, "type", "set", "delete")
		if err != nil {
			return nil, err
		}
		set := map[string]json.RawMessage{}
		if v, ok := m["set"]; ok {
			if v.Kind != yaml.MappingNode {
				return nil, d.errAt(v, f("set"), "must be a mapping of field paths to values")
			}
			for i := 0; i+1 < len(v.Content); i += 2 {
				k, val := v.Content[i], v.Content[i+1]
				if err := d.checkPath(k, f("set")); err != nil {
					return nil, err
				}
				if set[k.Value], err = d.jsonValue(val, f("set")+"."+k.Value); err != nil {
					return nil, err
				}
			}
		}
		var del []string
		if v, ok := m["delete"]; ok {
			if del, err = d.strings(v, f("delete")); err != nil {
				return nil, err
			}
			for i, p := range del {
				node := v
				if v.Kind == yaml.SequenceNode {
					node = v.Content[i]
				}
				if p == "" || strings.Contains(p, "..") || strings.HasPrefix(p, ".") || strings.HasSuffix(p, ".") {
					return nil, d.errAt(node, fmt.Sprintf("%s[%d]", f("delete"), i), "is not a field path such as a.b.0.c: %q", p)
				}
			}
		}
		if len(set) == 0 && len(del) == 0 {
			return nil, d.errAt(n, path, "needs set or delete")
		}
		return RewriteInput(set, del), nil

	case "limit_tool_calls":
		m, err := d.mapping(n, path, "type", "max", "reason")
		if err != nil {
			return nil, err
		}
		v, ok := m["max"]
		if !ok {
			return nil, d.errAt(n, f("max"), "is required: the number of calls allowed per turn")
		}
		mx, err := d.integer(v, f("max"))
		if err != nil {
			return nil, err
		}
		if mx < 0 {
			return nil, d.errAt(v, f("max"), "must not be negative")
		}
		var reason string
		if r, ok := m["reason"]; ok {
			if reason, err = d.str(r, f("reason")); err != nil {
				return nil, err
			}
		}
		return LimitToolCalls(reg.Name, mx, reason), nil

	case "mask_result":
		m, err := d.mapping(n, path, "type", "presets", "patterns", "replacement")
		if err != nil {
			return nil, err
		}
		repl := DefaultMask
		if v, ok := m["replacement"]; ok {
			if repl, err = d.str(v, f("replacement")); err != nil {
				return nil, err
			}
		}
		var rules []MaskRule
		if v, ok := m["presets"]; ok {
			names, err := d.strings(v, f("presets"))
			if err != nil {
				return nil, err
			}
			for i, name := range names {
				rs, ok := MaskPreset(name, repl)
				if !ok {
					node := v
					if v.Kind == yaml.SequenceNode {
						node = v.Content[i]
					}
					return nil, d.errAt(node, fmt.Sprintf("%s[%d]", f("presets"), i), "unknown preset %q (emails, secrets)", name)
				}
				rules = append(rules, rs...)
			}
		}
		if v, ok := m["patterns"]; ok {
			if v.Kind != yaml.SequenceNode {
				return nil, d.errAt(v, f("patterns"), "must be a list of {regex, replacement}")
			}
			for i, item := range v.Content {
				p := fmt.Sprintf("%s[%d]", f("patterns"), i)
				if item.Kind == yaml.ScalarNode {
					re, err := d.regexp(item, p)
					if err != nil {
						return nil, err
					}
					rules = append(rules, MaskRule{re, strings.ReplaceAll(repl, "$", "$$")})
					continue
				}
				pm, err := d.mapping(item, p, "regex", "replacement")
				if err != nil {
					return nil, err
				}
				rn, ok := pm["regex"]
				if !ok {
					return nil, d.errAt(item, p+".regex", "is required")
				}
				re, err := d.regexp(rn, p+".regex")
				if err != nil {
					return nil, err
				}
				r := strings.ReplaceAll(repl, "$", "$$")
				if rv, ok := pm["replacement"]; ok {
					if r, err = d.str(rv, p+".replacement"); err != nil {
						return nil, err
					}
				}
				rules = append(rules, MaskRule{re, r})
			}
		}
		if len(rules) == 0 {
			return nil, d.errAt(n, path, "needs presets or patterns")
		}
		return MaskResult(rules), nil

	case "inject_message":
		m, err := d.mapping(n, path, "type", "text", "role", "position", "timezone")
		if err != nil {
			return nil, err
		}
		o := InjectOptions{Now: d.opts.Now}
		v, ok := m["text"]
		if !ok {
			return nil, d.errAt(n, f("text"), "is required")
		}
		if o.Text, err = d.str(v, f("text")); err != nil {
			return nil, err
		}
		if v, ok := m["role"]; ok {
			s, err := d.str(v, f("role"))
			if err != nil {
				return nil, err
			}
			if s != "user" && s != "assistant" {
				return nil, d.errAt(v, f("role"), "must be user or assistant, got %q", s)
			}
			o.Role = events.Role(s)
		}
		if v, ok := m["position"]; ok {
			s, err := d.str(v, f("position"))
			if err != nil {
				return nil, err
			}
			switch s {
			case "start":
			case "end":
				o.AtEnd = true
			default:
				return nil, d.errAt(v, f("position"), "must be start or end, got %q", s)
			}
		}
		if v, ok := m["timezone"]; ok {
			s, err := d.str(v, f("timezone"))
			if err != nil {
				return nil, err
			}
			if o.Location, err = time.LoadLocation(s); err != nil {
				return nil, d.errAt(v, f("timezone"), "unknown time zone %q", s)
			}
		}
		return InjectMessage(o), nil

	case "validate_json":
		m, err := d.mapping(n, path, "type", "schema", "schema_file", "message", "keep_code_fence")
		if err != nil {
			return nil, err
		}
		var o ValidateOptions
		sn, hasSchema := m["schema"]
		fn, hasFile := m["schema_file"]
		var schemaNode *yaml.Node
		switch {
		case hasSchema && hasFile:
			return nil, d.errAt(fn, f("schema_file"), "give schema or schema_file, not both")
		case hasSchema:
			schemaNode = sn
			if o.Schema, err = d.jsonValue(sn, f("schema")); err != nil {
				return nil, err
			}
		case hasFile:
			schemaNode = fn
			p, err := d.str(fn, f("schema_file"))
			if err != nil {
				return nil, err
			}
			if !filepath.IsAbs(p) {
				p = filepath.Join(d.opts.BaseDir, p)
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return nil, d.errAt(fn, f("schema_file"), "%v", err)
			}
			if !json.Valid(b) {
				var y any
				if yaml.Unmarshal(b, &y) != nil {
					return nil, d.errAt(fn, f("schema_file"), "%s is neither JSON nor YAML", p)
				}
				if b, err = json.Marshal(normalizeYAML(y)); err != nil {
					return nil, d.errAt(fn, f("schema_file"), "%v", err)
				}
			}
			o.Schema = b
		}
		if v, ok := m["message"]; ok {
			if o.Message, err = d.str(v, f("message")); err != nil {
				return nil, err
			}
		}
		if v, ok := m["keep_code_fence"]; ok {
			if o.KeepCodeFence, err = d.boolean(v, f("keep_code_fence")); err != nil {
				return nil, err
			}
		}
		h, err := ValidateJSON(o)
		if err != nil {
			field := f("schema")
			if hasFile {
				field = f("schema_file")
			}
			return nil, d.errAt(schemaNode, field, "%s", strings.TrimPrefix(err.Error(), ErrInvalidHook.Error()+": "))
		}
		return h, nil
	}
	return nil, d.errAt(typN, path+".type", "unknown builtin %q", typ)
}

func (d *decoder) checkPath(k *yaml.Node, path string) error {
	p := k.Value
	if p == "" || strings.Contains(p, "..") || strings.HasPrefix(p, ".") || strings.HasSuffix(p, ".") {
		return d.errAt(k, path+"."+p, "is not a field path such as a.b.0.c")
	}
	return nil
}
