package a2a

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"mime"
	"net/url"
	"slices"
	"strings"

	spec "github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/media"
)

// toParts maps the parts of a user message to the parts of a turn's user
// message: text as text, data as its JSON in a text part, bytes (raw)
// as inline media, a URL (https) as media the provider fetches. Media
// types are the turn's (events.ImageMediaTypes, events.FileMediaTypes).
func toParts(in spec.ContentParts) ([]events.Part, error) {
	out := make([]events.Part, 0, len(in))
	for i, p := range in {
		if p == nil {
			return nil, invalidParams("message.parts[%d]: empty", i)
		}
		switch c := p.Content.(type) {
		case spec.Text:
			out = append(out, events.Part{Type: events.PartText, Text: string(c)})
		case spec.Data:
			b, err := json.Marshal(c.Value)
			if err != nil {
				return nil, invalidParams("message.parts[%d].data: %v", i, err)
			}
			out = append(out, events.Part{Type: events.PartText, Text: string(b)})
		case spec.Raw, spec.URL:
			mp, err := mediaPart(p)
			if err != nil {
				return nil, fmt.Errorf("message.parts[%d]: %w", i, err)
			}
			out = append(out, mp)
		default:
			return nil, invalidParams("message.parts[%d]: no text, data, raw or url", i)
		}
	}
	return out, nil
}

func mediaPart(p *spec.Part) (events.Part, error) {
	mt, _, err := mime.ParseMediaType(p.MediaType)
	if p.MediaType == "" || err != nil {
		return events.Part{}, invalidParams("mediaType: missing or not a media type (%q)", p.MediaType)
	}
	typ, allowed := events.PartFile, events.FileMediaTypes
	if strings.HasPrefix(mt, "image/") {
		typ, allowed = events.PartImage, events.ImageMediaTypes
	}
	if !slices.Contains(allowed, mt) {
		return events.Part{}, spec.NewError(spec.ErrUnsupportedContentType, fmt.Sprintf("mediaType %q is not supported (images: %s; files: %s)",
			p.MediaType, strings.Join(events.ImageMediaTypes, ", "), strings.Join(events.FileMediaTypes, ", ")))
	}
	part := events.Part{Type: typ, MediaType: mt}
	if typ == events.PartFile {
		part.Filename = p.Filename
	}
	switch c := p.Content.(type) {
	case spec.Raw:
		if len(c) == 0 {
			return events.Part{}, invalidParams("raw: no bytes")
		}
		if len(c) > media.MaxSize {
			return events.Part{}, invalidParams("raw: %d bytes, more than %d", len(c), media.MaxSize)
		}
		part.Data = base64.StdEncoding.EncodeToString(c)
	case spec.URL:
		u, err := url.Parse(string(c))
		if err != nil || u.Scheme != "https" || u.Host == "" {
			return events.Part{}, invalidParams("url: must be an absolute https URL, got %q", string(c))
		}
		part.URL = string(c)
	}
	if err := part.Validate(); err != nil {
		return events.Part{}, invalidParams("%v", err)
	}
	return part, nil
}

// offload stores the message's large media in LLMW_MEDIA as the gateway
// does, so that the turn request fits a NATS message.
func (s *Server) offload(ctx context.Context, parts []events.Part) error {
	msgs := []events.Message{{Role: events.RoleUser, Content: parts}}
	if !media.NeedsOffload(msgs, 0) {
		return nil
	}
	st, err := s.media.Store(ctx)
	if err != nil {
		return err
	}
	if _, err := st.OffloadParts(ctx, parts, 0); err != nil {
		return fmt.Errorf("a2a: store an attachment: %w", err)
	}
	return nil
}

// Words of a text answer to an input-required task (any case, trimmed).
var (
	approveWords = []string{"approve", "approved", "yes", "y", "ok"}
	denyWords    = []string{"deny", "denied", "no", "n", "reject"}
)

// decisionsOf reads the decisions of a message to an input-required
// task: a data part {"decisions": {"<call id>": "approve" | "deny" |
// {"deny": "why"} | {"input": {...}}}} deciding each pending call, or a
// text "approve" / "deny" deciding all of them alike.
func decisionsOf(parts spec.ContentParts, pending []events.ToolCall) (map[string]events.Decision, error) {
	var text strings.Builder
	for _, p := range parts {
		if p == nil {
			continue
		}
		switch c := p.Content.(type) {
		case spec.Data:
			m, ok := c.Value.(map[string]any)
			if !ok || m["decisions"] == nil {
				continue
			}
			b, err := json.Marshal(map[string]any{"turn_id": "_", "decisions": m["decisions"]})
			if err != nil {
				return nil, invalidParams("decisions: %v", err)
			}
			var rr events.ResumeRequest
			if err := json.Unmarshal(b, &rr); err != nil {
				return nil, invalidParams("decisions: %v", err)
			}
			for _, c := range pending {
				if _, ok := rr.Decisions[c.ID]; !ok {
					return nil, invalidParams("decisions: no decision for the pending call %s (%s)", c.ID, c.Name)
				}
			}
			for id := range rr.Decisions {
				if !slices.ContainsFunc(pending, func(c events.ToolCall) bool { return c.ID == id }) {
					return nil, invalidParams("decisions: %q is not a pending call (pending: %s)", id, pendingIDs(pending))
				}
			}
			return rr.Decisions, nil
		case spec.Text:
			text.WriteString(string(c))
		}
	}
	word := strings.ToLower(strings.TrimSpace(text.String()))
	var kind events.DecisionKind
	switch {
	case slices.Contains(approveWords, word):
		kind = events.DecisionApprove
	case slices.Contains(denyWords, word):
		kind = events.DecisionDeny
	default:
		return nil, invalidParams(`the task waits for approval of %s: answer "approve" or "deny", or a data part {"decisions": {"<id>": "approve" | "deny" | {"input": {...}}}}`, pendingIDs(pending))
	}
	out := make(map[string]events.Decision, len(pending))
	for _, c := range pending {
		out[c.ID] = events.Decision{Kind: kind}
	}
	return out, nil
}

func pendingIDs(pending []events.ToolCall) string {
	ids := make([]string, len(pending))
	for i, c := range pending {
		ids[i] = c.ID + " (" + c.Name + ")"
	}
	return strings.Join(ids, ", ")
}
