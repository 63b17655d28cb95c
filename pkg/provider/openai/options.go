package openai

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/openai/openai-go/v3/packages/param"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/llm"
)

// Unsent returns the warning for a setting of the request that provider
// (an adapter prefix) has no field for: it was not sent
// (docs/protocol.md §3, events.ModelOptions).
func Unsent(provider, setting string) events.Warning {
	return events.Warning{Setting: setting, Message: provider + " has no " + setting + " setting; it was not sent"}
}

// ExtraFields returns what provider_options (opts, a JSON object) adds to
// a request body, for the params' SetExtraFields: each top-level key of
// opts merged into body's value of that key as a JSON Merge Patch (RFC
// 7396: objects merge key by key, null removes, anything else replaces).
// body is the params as the SDK serializes them. A value merged into an
// object the adapter set keeps the adapter's other keys, so
// {"reasoning":{"summary":"detailed"}} changes the summary and keeps the
// effort.
func ExtraFields(body any, opts json.RawMessage) (map[string]any, error) {
	var patch map[string]json.RawMessage
	if err := json.Unmarshal(opts, &patch); err != nil || patch == nil {
		return nil, fmt.Errorf("%w: provider_options: must be a JSON object", ErrInvalidRequest)
	}
	if len(patch) == 0 {
		return nil, nil
	}
	b, err := json.Marshal(body)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidRequest, err)
	}
	var base map[string]json.RawMessage
	if err := json.Unmarshal(b, &base); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidRequest, err)
	}
	extra := make(map[string]any, len(patch))
	for k, v := range patch {
		if k == "" {
			return nil, fmt.Errorf("%w: provider_options: a key is empty", ErrInvalidRequest)
		}
		if isNull(v) {
			extra[k] = param.Omit
			continue
		}
		m, err := mergePatch(base[k], v)
		if err != nil {
			return nil, fmt.Errorf("%w: provider_options.%s: %w", ErrInvalidRequest, k, err)
		}
		extra[k] = m
	}
	return extra, nil
}

func isNull(v json.RawMessage) bool { return string(bytes.TrimSpace(v)) == "null" }

func isObject(v json.RawMessage) bool {
	v = bytes.TrimSpace(v)
	return len(v) > 0 && v[0] == '{'
}

// mergePatch applies patch to target (RFC 7396).
func mergePatch(target, patch json.RawMessage) (json.RawMessage, error) {
	if !isObject(patch) {
		return patch, nil
	}
	var p map[string]json.RawMessage
	if err := json.Unmarshal(patch, &p); err != nil {
		return nil, err
	}
	t := map[string]json.RawMessage{}
	if isObject(target) {
		if err := json.Unmarshal(target, &t); err != nil {
			return nil, err
		}
	}
	for k, v := range p {
		if isNull(v) {
			delete(t, k)
			continue
		}
		m, err := mergePatch(t[k], v)
		if err != nil {
			return nil, err
		}
		t[k] = m
	}
	return json.Marshal(t)
}

// MediaType returns a media part's type as the contract compares it:
// lower case, no surrounding space.
func MediaType(p events.Part) string { return strings.ToLower(strings.TrimSpace(p.MediaType)) }

// IsTextMedia reports whether a file of media type mt is text (text/*,
// application/json): neither OpenAI API has a file input for those, so
// the adapters send their content as text (TextFile).
func IsTextMedia(mt string) bool { return strings.HasPrefix(mt, "text/") || mt == "application/json" }

// DataURL returns the data URL of a part with inline data, the form both
// APIs take for image and file bytes.
func DataURL(p events.Part) string { return "data:" + MediaType(p) + ";base64," + p.Data }

// CheckSource returns an invalid-request error naming field when p has
// neither inline data nor a URL: a part holding only an LLMW_MEDIA ref
// that ingest did not resolve before the call.
func CheckSource(field string, p events.Part) error {
	if p.Data != "" || p.URL != "" {
		return nil
	}
	if p.Ref != "" {
		return fmt.Errorf("%w: %s: unresolved media ref %q (ingest resolves refs before the call)", ErrInvalidRequest, field, p.Ref)
	}
	return fmt.Errorf("%w: %s: a %s part needs data or url", ErrInvalidRequest, field, p.Type)
}

// Describe names a media part for an unsupported_content error:
// "image/png image", "audio/ogg file by url".
func Describe(p events.Part) string {
	s := MediaType(p) + " " + string(p.Type)
	if p.URL != "" {
		s += " by url"
	}
	return s
}

// TextFile returns the text a text file part (IsTextMedia, inline data)
// is sent as: its content between a line naming the file and a closing
// line, so the model can tell it from the message around it.
func TextFile(field string, p events.Part) (string, error) {
	b, err := p.Bytes()
	if err != nil {
		return "", fmt.Errorf("%w: %s: %w", ErrInvalidRequest, field, err)
	}
	var sb strings.Builder
	sb.WriteString("<file")
	if p.Filename != "" {
		fmt.Fprintf(&sb, " name=%q", p.Filename)
	}
	fmt.Fprintf(&sb, " media_type=%q>\n", MediaType(p))
	sb.Write(b)
	if len(b) > 0 && b[len(b)-1] != '\n' {
		sb.WriteByte('\n')
	}
	sb.WriteString("</file>")
	return sb.String(), nil
}

// Unsupported returns the unsupported_content error of provider for the
// part at field.
func Unsupported(provider, field string, p events.Part) error {
	return llm.UnsupportedContent(provider, field, Describe(p))
}

// MappingError returns the error of a request that could not be mapped:
// an llm.ProviderError as is (unsupported_content), anything else (an
// ErrInvalidRequest) as kind invalid_request, so that ingest answers it
// as the caller's mistake and nobody retries it.
func MappingError(err error) error {
	var pe llm.ProviderError
	if errors.As(err, &pe) {
		return err
	}
	return &llm.APIError{ErrKind: llm.KindInvalidRequest, Err: err}
}
