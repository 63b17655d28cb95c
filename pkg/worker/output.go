package worker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/tool"
)

// checkOutput checks the final answer against Config.Options'
// ResponseFormat when the model stopped without tool calls. It returns
// nil, false when the answer fits (r.output holds it) or there is no
// format; nil, true when a repair step follows (the repair message is
// appended and the next phase is a model call); or the Result of the
// failed turn.
func (r *run) checkOutput(ctx context.Context) (*Result, bool) {
	f := r.cfg.Options.ResponseFormat
	if f == nil {
		return nil, false
	}
	out, problem := r.parseOutput()
	if problem == "" {
		r.output = out
		return nil, false
	}
	r.output = nil
	if r.st.OutputRepairs < r.cfg.repairs && r.st.Step < r.cfg.maxSteps {
		r.st.OutputRepairs++
		r.st.Messages = append(r.st.Messages, events.UserText(repairMessage(problem)))
		r.continueHook = ""
		r.st.Phase = PhaseModel
		return nil, true
	}
	what := "json"
	if f.Type == events.FormatJSONSchema {
		what = "json_schema " + strconv.Quote(f.SchemaName())
	}
	reason := fmt.Sprintf("the final answer does not fit the response format (%s): %s", what, problem)
	switch {
	case r.st.OutputRepairs < r.cfg.repairs:
		reason += fmt.Sprintf("; max_steps (%d) left no model call for a repair", r.cfg.maxSteps)
	case r.st.OutputRepairs > 0:
		reason += fmt.Sprintf(" (after %d repair step%s)", r.st.OutputRepairs, plural(r.st.OutputRepairs))
	}
	return r.end(ctx, StatusFailed, CodeInvalidOutput, ErrInvalidOutput, reason, "", nil), false
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// repairMessage is the user message of a repair step.
func repairMessage(problem string) string {
	return "Your answer does not fit the required output format: " + problem +
		". Answer again with only the corrected JSON value, fitting the schema, and nothing else."
}

// parseOutput reads the final answer (the text of the last message, if
// the model wrote it) as JSON and checks it against the response format.
// It returns the compacted JSON, or the first violation.
func (r *run) parseOutput() (json.RawMessage, string) {
	var text string
	if n := len(r.st.Messages); n > 0 && r.st.Messages[n-1].Role == events.RoleAssistant {
		text = r.st.Messages[n-1].Text()
	}
	return checkAnswer(r.cfg.Options.ResponseFormat, r.cfg.output, text)
}

// checkAnswer checks text against f (v compiled from f's schema, nil for
// type json). A Markdown code fence around the JSON is taken off: models
// add one even when asked for JSON only.
func checkAnswer(f *events.ResponseFormat, v *tool.Validator, text string) (json.RawMessage, string) {
	body := unfence(text)
	if body == "" {
		return nil, "the answer has no text; it must be a JSON value"
	}
	var out bytes.Buffer
	if err := json.Compact(&out, []byte(body)); err != nil {
		return nil, "the answer is not valid JSON (" + strings.TrimPrefix(err.Error(), "json: ") + ")"
	}
	if v == nil {
		if out.Bytes()[0] != '{' {
			return nil, "the answer must be a JSON object"
		}
		return out.Bytes(), ""
	}
	if err := v.Validate(out.Bytes()); err != nil {
		var ia *tool.InvalidArgumentError
		if errors.As(err, &ia) && len(ia.Problems) > 0 {
			p := ia.Problems[0]
			if p.Field == "" {
				return nil, "the answer " + p.Message
			}
			return nil, "field " + strconv.Quote(p.Field) + " " + p.Message
		}
		return nil, err.Error()
	}
	return out.Bytes(), ""
}

// unfence trims text and takes off a Markdown code fence around all of it
// (```json … ```).
func unfence(text string) string {
	t := strings.TrimSpace(text)
	if !strings.HasPrefix(t, "```") || !strings.HasSuffix(t, "```") || len(t) < 6 {
		return t
	}
	nl := strings.IndexByte(t, '\n')
	if nl < 0 {
		return t
	}
	return strings.TrimSpace(t[nl+1 : len(t)-3])
}

// OutputFormat returns the response format whose schema invopop/jsonschema
// reflects from T (as pkg/tool does for tool input, tool.SchemaFor: field
// names from json tags, required unless omitempty, jsonschema tags for
// keywords, no additional properties), named after nothing ("output").
// Set it as Config.Options.ResponseFormat and read the answer with
// RunStructured. T must be a struct or map type: the answer is a JSON
// object, which every provider's structured output asks for.
func OutputFormat[T any]() (*events.ResponseFormat, error) {
	schema, err := tool.SchemaFor[T]()
	if err != nil {
		return nil, fmt.Errorf("%w: output type: %w", ErrInvalidConfig, err)
	}
	return &events.ResponseFormat{Type: events.FormatJSONSchema, Schema: schema}, nil
}

// RunStructured runs a turn of w (Run) and decodes its output into a T.
// w's Config.Options.ResponseFormat is what the answer is checked against;
// make it with OutputFormat[T]. The error is Run's, the turn's (Result.Err:
// e.g. ErrInvalidOutput when the answer did not fit after the repairs),
// ErrNoOutput for a turn that paused or has no response format, or the
// decoding's; the Result is there whenever a turn ran.
func RunStructured[T any](ctx context.Context, w *Worker, messages []events.Message) (T, *Result, error) {
	var v T
	if w.cfg.Options.ResponseFormat == nil {
		return v, nil, fmt.Errorf("%w: the worker has no Config.Options.ResponseFormat (see OutputFormat)", ErrNoOutput)
	}
	res, err := w.Run(ctx, messages)
	if err != nil {
		return v, nil, err
	}
	if err := res.Err(); err != nil {
		return v, res, err
	}
	if res.Status != StatusCompleted || res.Output == nil {
		return v, res, fmt.Errorf("%w: the turn is %s", ErrNoOutput, res.Status)
	}
	if err := json.Unmarshal(res.Output, &v); err != nil {
		return v, res, fmt.Errorf("worker: decoding the output into %T: %w", v, err)
	}
	return v, res, nil
}
