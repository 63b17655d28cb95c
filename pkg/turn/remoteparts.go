package turn

import (
	"context"
	"fmt"
	"mime"
	"net/url"
	"slices"
	"strings"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/media"
)

// mediaPutter stores bytes in the LLMW_MEDIA object store by their
// content (media.Store.Put).
type mediaPutter interface {
	Put(ctx context.Context, data []byte, mediaType string) (string, error)
}

// remoteContent is the content of the answer of a completed remote task
// (docs/protocol.md §12 "Remote agents"): its artifacts' parts in order,
// text and data (its JSON) as text — the artifacts' texts one a line, as
// RemoteTask.Answer joins them — a file as an image or file part: its
// bytes stored in LLMW_MEDIA (a ref, whatever their size: an artifact
// may hold any number of files, and the answer is in the child's
// events, its checkpoint, its parent's tool result and every later
// model call of the parent), its URL as a part the provider fetches. A
// file that cannot be one is a text note in its place saying what was
// wrong (notes). The status message is the answer of a task without
// artifacts. A store that cannot be written is the error.
//
// The bytes are stored by their SHA-256, so a run that continues the
// turn and stores them again writes no second object.
func remoteContent(ctx context.Context, task *RemoteTask, agent string, store func(context.Context) (mediaPutter, error)) (content []events.Part, notes []string, err error) {
	var text strings.Builder
	line := false // the next text starts a line: a new artifact, or after a note
	flush := func() {
		if text.Len() > 0 {
			content = append(content, events.TextPart(text.String()))
			text.Reset()
		}
	}
	write := func(s string) {
		if s == "" {
			return
		}
		if line && (text.Len() > 0 || len(content) > 0) {
			text.WriteString("\n")
		}
		line = false
		text.WriteString(s)
	}
	for _, a := range task.Artifacts {
		parts := a.Parts
		if parts == nil && a.Text != "" {
			parts = []RemotePart{{Kind: RemoteTextPart, Text: a.Text}}
		}
		line = true
		for i, p := range parts {
			switch p.Kind {
			case RemoteTextPart:
				write(p.Text)
			case RemoteDataPart:
				write(string(p.Data))
			case RemoteFilePart:
				part, why := remoteFile(p)
				if why == "" && p.URL == "" {
					var st mediaPutter
					if st, err = store(ctx); err == nil {
						part.Ref, err = st.Put(ctx, p.Raw, part.MediaType)
					}
					if err != nil {
						return nil, nil, fmt.Errorf("artifact %s part %d, %s: store its %d bytes in %s: %w", a.ID, i, fileLabel(p), len(p.Raw), events.BucketMedia, err)
					}
					part.Size = int64(len(p.Raw))
				}
				if why != "" {
					note := fmt.Sprintf("[%s of artifact %s from the remote agent %s is left out: %s]", fileLabel(p), a.ID, agent, why)
					notes = append(notes, note)
					line = true
					write(note)
					line = true
					continue
				}
				flush()
				content = append(content, part)
				line = false
			}
		}
	}
	flush()
	if len(content) == 0 {
		return []events.Part{events.TextPart(task.Message)}, notes, nil
	}
	return content, notes, nil
}

// fileLabel names a remote file in a note: its name, else its URL.
func fileLabel(p RemotePart) string {
	s := "a file"
	switch {
	case p.Name != "":
		s = fmt.Sprintf("the file %q", p.Name)
	case p.URL != "":
		s = "the file " + p.URL
	}
	if p.MediaType != "" {
		s += " (" + p.MediaType + ")"
	}
	return s
}

// remoteFile is the image or file part of a remote file, its bytes not
// stored yet, or why it cannot be one: a media type that is missing (and
// that bytes with a signature do not name), malformed or not one the
// models read (events.ImageMediaTypes, events.FileMediaTypes); no bytes,
// more than media.MaxSize, or bytes that are not of the media type (a
// 0.3 agent's base64 that does not decode reaches the turn as that
// text); a URL that is not https.
func remoteFile(p RemotePart) (events.Part, string) {
	mt := p.MediaType
	if mt == "" && len(p.Raw) > 0 {
		// An agent that names no media type: bytes with the signature of
		// a type the models read are of that type.
		if holds, _ := events.MatchMedia("", p.Raw); slices.Contains(events.ImageMediaTypes, holds) || slices.Contains(events.FileMediaTypes, holds) {
			mt = holds
		}
	}
	if mt == "" {
		return events.Part{}, "it has no media type"
	}
	parsed, _, err := mime.ParseMediaType(mt)
	if err != nil {
		return events.Part{}, fmt.Sprintf("its media type %q is not a media type (%v)", mt, err)
	}
	typ, allowed := events.PartFile, events.FileMediaTypes
	if strings.HasPrefix(parsed, "image/") {
		typ, allowed = events.PartImage, events.ImageMediaTypes
	}
	if !slices.Contains(allowed, parsed) {
		return events.Part{}, fmt.Sprintf("%s is not a media type the models read (images: %s; files: %s)",
			parsed, strings.Join(events.ImageMediaTypes, ", "), strings.Join(events.FileMediaTypes, ", "))
	}
	part := events.Part{Type: typ, MediaType: parsed}
	if typ == events.PartFile {
		part.Filename = p.Name
	}
	if p.URL != "" {
		if u, err := url.Parse(p.URL); err != nil || u.Scheme != "https" || u.Host == "" {
			return events.Part{}, fmt.Sprintf("its URL %q is not an absolute https URL, which the providers fetch", p.URL)
		}
		part.URL = p.URL
		return part, ""
	}
	switch {
	case len(p.Raw) == 0:
		return events.Part{}, "it has neither bytes nor a URL"
	case len(p.Raw) > media.MaxSize:
		return events.Part{}, fmt.Sprintf("its %d bytes are more than the %d a media object holds", len(p.Raw), media.MaxSize)
	}
	if holds, ok := events.MatchMedia(parsed, p.Raw); !ok {
		return events.Part{}, fmt.Sprintf("its bytes hold %s, not %s", holds, parsed)
	}
	return part, ""
}
