package gateway

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/media"
	"github.com/llmworker/llmworker/pkg/turn"
)

// fileToPart maps an AI SDK file part (FileUIPart: mediaType, filename,
// url) of a user message to an image part (image/* media types) or a file
// part: a data URL's bytes become the part's data, an https URL its url.
// The errors name the UI part's field.
func fileToPart(p UIPart) (events.Part, error) {
	mt := mediaTypeOnly(p.MediaType)
	var (
		data   []byte
		inline bool
	)
	switch {
	case p.URL == "":
		return events.Part{}, errors.New("url: missing (a data: URL holding the file, or an https URL)")
	case len(p.URL) >= 5 && strings.EqualFold(p.URL[:5], "data:"):
		dmt, b, err := parseDataURL(p.URL)
		if err != nil {
			return events.Part{}, fmt.Errorf("url: %w", err)
		}
		if mt == "" {
			mt = dmt
		}
		data, inline = b, true
	default:
		u, err := url.Parse(p.URL)
		if err != nil || u.Scheme != "https" || u.Host == "" {
			scheme := "none"
			if err == nil && u.Scheme != "" {
				scheme = strconv.Quote(u.Scheme)
			}
			return events.Part{}, fmt.Errorf("url: must be a data: URL or an absolute https URL, got scheme %s", scheme)
		}
	}
	if mt == "" {
		return events.Part{}, errors.New("mediaType: missing")
	}
	typ, allowed := events.PartFile, events.FileMediaTypes
	if strings.HasPrefix(mt, "image/") {
		typ, allowed = events.PartImage, events.ImageMediaTypes
	}
	if !slices.Contains(allowed, mt) {
		return events.Part{}, fmt.Errorf("mediaType: %q is not supported (images: %s; files: %s)",
			p.MediaType, strings.Join(events.ImageMediaTypes, ", "), strings.Join(events.FileMediaTypes, ", "))
	}
	if len(data) > media.MaxSize {
		return events.Part{}, fmt.Errorf("url: the file has %d bytes, more than %d", len(data), media.MaxSize)
	}
	part := events.Part{Type: typ, MediaType: mt}
	if typ == events.PartFile {
		part.Filename = p.Filename
	}
	if inline {
		part.Data = base64.StdEncoding.EncodeToString(data)
	} else {
		part.URL = p.URL
	}
	if err := part.Validate(); err != nil {
		var fe *events.FieldError
		if errors.As(err, &fe) && fe.Field == "data" {
			return events.Part{}, fmt.Errorf("url: the data URL's bytes: %s", fe.Problem)
		}
		return events.Part{}, err
	}
	return part, nil
}

// mediaTypeOnly is a media type without parameters, lower case.
func mediaTypeOnly(s string) string {
	s, _, _ = strings.Cut(s, ";")
	return strings.ToLower(strings.TrimSpace(s))
}

// parseDataURL reads "data:<media type>[;params];base64,<data>" (RFC 2397),
// the form a browser's FileReader.readAsDataURL gives and useChat sends.
func parseDataURL(s string) (string, []byte, error) {
	head, body, ok := strings.Cut(s[len("data:"):], ",")
	if !ok {
		return "", nil, errors.New("a data URL needs a ',' before its data")
	}
	params := strings.Split(head, ";")
	if !strings.EqualFold(strings.TrimSpace(params[len(params)-1]), "base64") {
		return "", nil, errors.New("the data URL is not base64 (want data:<media type>;base64,<data>)")
	}
	b, err := base64.StdEncoding.DecodeString(body)
	if err != nil {
		return "", nil, fmt.Errorf("the data URL's data is not standard base64: %v", err)
	}
	if len(b) == 0 {
		return "", nil, errors.New("the data URL holds no bytes")
	}
	return mediaTypeOnly(params[0]), b, nil
}

// filenameNote names a file part in an error.
func filenameNote(p UIPart) string {
	if p.Filename == "" {
		return " (file)"
	}
	return " (file " + strconv.Quote(p.Filename) + ")"
}

// maxInlineTotal bounds the inline media of one turn request: the parts
// above it are stored in LLMW_MEDIA too, so that the request fits a NATS
// message (1 MiB by default) with room for the rest.
const maxInlineTotal = 512 << 10

// offload stores the parts' media above events.InlineMediaLimit in
// LLMW_MEDIA and leaves refs in their place; when the inline rest is
// still above maxInlineTotal, every inline media part goes there.
func (g *Gateway) offload(ctx context.Context, parts []events.Part) error {
	limit, total := events.InlineMediaLimit, 0
	need := false
	for i := range parts {
		if parts[i].IsMedia() && parts[i].Data != "" {
			n := base64.StdEncoding.DecodedLen(len(parts[i].Data))
			if n > limit {
				need = true
			} else {
				total += len(parts[i].Data)
			}
		}
	}
	if total > maxInlineTotal {
		limit, need = 1, true
	}
	if !need {
		return nil
	}
	st, err := g.mediaStore(ctx)
	if err != nil {
		return err
	}
	if _, err := st.OffloadParts(ctx, parts, limit); err != nil {
		return fmt.Errorf("gateway: store an attachment: %w", err)
	}
	return nil
}

// mediaStore opens LLMW_MEDIA on first use: a gateway whose clients send
// no large attachment needs no bucket.
func (g *Gateway) mediaStore(ctx context.Context) (*media.Store, error) {
	st, err := g.media.Store(ctx)
	if errors.Is(err, jetstream.ErrBucketNotFound) || errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, fmt.Errorf("%w: no object store %s (run llmworker provision)", turn.ErrNotProvisioned, events.BucketMedia)
	}
	if err != nil {
		return nil, fmt.Errorf("gateway: %w", err)
	}
	return st, nil
}

// mediaPath is where GET /api/chat/{id}/media/{ref} serves a ref of the
// session.
func mediaPath(session, ref string) string {
	return "/api/chat/" + url.PathEscape(session) + "/media/" + ref
}

// uiFilePart is an image or file part of a turn's input as the AI SDK's
// file part: inline data as a data URL, an https URL as it is, a ref as
// the path of the gateway's media endpoint.
func uiFilePart(session string, p *events.Part) UIPart {
	u := p.URL
	switch {
	case p.Data != "":
		u = "data:" + p.MediaType + ";base64," + p.Data
	case p.Ref != "":
		u = mediaPath(session, p.Ref)
	}
	return UIPart{Type: "file", MediaType: p.MediaType, Filename: p.Filename, URL: u}
}

// handleMedia is GET /api/chat/{id}/media/{ref}: the bytes of an
// attachment of the session's user messages that is stored in LLMW_MEDIA,
// with its media type. A ref that no turn of the session was sent is not
// found, whoever else holds it.
func (g *Gateway) handleMedia(w http.ResponseWriter, r *http.Request) {
	session, ref := r.PathValue("id"), r.PathValue("ref")
	if !events.ValidToken(session) {
		writeError(w, badf("chat id: must be 1-256 characters without '.', '*', '>' or spaces, got %q", session))
		return
	}
	if err := g.authorize(r, session, Read); err != nil {
		writeError(w, err)
		return
	}
	if !events.ValidMediaRef(ref) {
		writeError(w, badf("ref: must be sha256:<64 lowercase hex digits>, got %q", ref))
		return
	}
	ctx := r.Context()
	part, found, err := g.attachment(ctx, session, ref)
	if err != nil {
		writeError(w, err)
		return
	}
	if !found {
		writeError(w, fmt.Errorf("%w: session %s was sent no attachment %s", ErrNotFound, session, ref))
		return
	}
	st, err := g.mediaStore(ctx)
	if err != nil {
		writeError(w, err)
		return
	}
	data, err := st.Get(ctx, ref)
	if errors.Is(err, media.ErrNotFound) {
		writeError(w, fmt.Errorf("%w: %s is not stored (%s keeps media for its age limit)", ErrNotFound, ref, events.BucketMedia))
		return
	}
	if err != nil {
		writeError(w, err)
		return
	}
	h := w.Header()
	h.Set("Content-Type", part.MediaType)
	h.Set("Content-Length", strconv.Itoa(len(data)))
	h.Set("X-Content-Type-Options", "nosniff")
	// The bytes of a ref never change; the answer is the caller's own.
	h.Set("Cache-Control", "private, max-age=86400, immutable")
	disp := "attachment"
	if part.Type == events.PartImage || part.MediaType == "application/pdf" {
		disp = "inline"
	}
	if part.Filename != "" {
		disp += "; filename*=UTF-8''" + url.PathEscape(part.Filename)
	}
	h.Set("Content-Disposition", disp)
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		_, _ = w.Write(data)
	}
}

// attachment finds the part holding ref among the inputs of the session's
// turns (llmw.turn.started), reading only the session's turn channel.
func (g *Gateway) attachment(ctx context.Context, session, ref string) (events.Part, bool, error) {
	filter := g.subj.Events(session, "*", events.ChannelTurn)
	info, err := g.events.Info(ctx, jetstream.WithSubjectFilter(filter))
	if err != nil {
		return events.Part{}, false, fmt.Errorf("gateway: attachments of %s: %w", session, err)
	}
	var total uint64
	for _, n := range info.State.Subjects {
		total += n
	}
	if total == 0 {
		return events.Part{}, false, nil
	}
	cons, err := g.js.OrderedConsumer(ctx, events.StreamEvents, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{filter}, DeliverPolicy: jetstream.DeliverAllPolicy,
	})
	if err != nil {
		return events.Part{}, false, fmt.Errorf("gateway: attachments of %s: %w", session, err)
	}
	for got := uint64(0); got < total; {
		batch, err := cons.Fetch(int(min(total-got, historyFetch)), jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			return events.Part{}, false, fmt.Errorf("gateway: attachments of %s: %w", session, err)
		}
		n := 0
		for m := range batch.Messages() {
			n++
			env, err := events.DecodeEnvelope(m.Headers(), m.Data())
			if err != nil || env.Type != events.TypeTurnStarted {
				continue
			}
			started, err := events.DecodeData[events.TurnStarted](env)
			if err != nil {
				continue
			}
			for _, msg := range started.Input {
				for _, p := range msg.Content {
					if p.IsMedia() && p.Ref == ref {
						return p, true, nil
					}
				}
			}
		}
		if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) {
			return events.Part{}, false, fmt.Errorf("gateway: attachments of %s: %w", session, err)
		}
		if n == 0 {
			break
		}
		got += uint64(n)
	}
	return events.Part{}, false, nil
}
