package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/media"
)

// extMediaTypes are the media types of the extensions --attach knows.
var extMediaTypes = map[string]string{
	".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".gif": "image/gif", ".webp": "image/webp",
	".pdf": "application/pdf",
	".txt": "text/plain", ".text": "text/plain", ".log": "text/plain", ".md": "text/markdown", ".markdown": "text/markdown",
	".csv": "text/csv", ".html": "text/html", ".htm": "text/html", ".json": "application/json",
	".wav": "audio/wav", ".mp3": "audio/mpeg", ".ogg": "audio/ogg", ".oga": "audio/ogg", ".opus": "audio/ogg",
	".flac": "audio/flac", ".aac": "audio/aac", ".weba": "audio/webm",
}

// sniffedTypes maps what http.DetectContentType says of a file with an
// unknown extension to the media types a part may have.
var sniffedTypes = map[string]string{
	"image/png": "image/png", "image/jpeg": "image/jpeg", "image/gif": "image/gif", "image/webp": "image/webp",
	"application/pdf": "application/pdf", "text/plain": "text/plain", "text/html": "text/html",
	"audio/wave": "audio/wav", "audio/mpeg": "audio/mpeg", "application/ogg": "audio/ogg", "audio/webm": "audio/webm",
}

// attachmentPart reads a file into an image part (image media types) or a
// file part (the others, with its base name), inline: the media type from
// the extension, else from the bytes; the part's validation checks that
// the bytes are of that type.
func attachmentPart(path string) (events.Part, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return events.Part{}, fmt.Errorf("%w: --attach %s: %v", ErrUsage, path, err)
	}
	if len(data) == 0 {
		return events.Part{}, fmt.Errorf("%w: --attach %s: the file is empty", ErrUsage, path)
	}
	if len(data) > media.MaxSize {
		return events.Part{}, fmt.Errorf("%w: --attach %s: %d bytes, more than the %d a media object may have", ErrUsage, path, len(data), media.MaxSize)
	}
	mt, known := extMediaTypes[strings.ToLower(filepath.Ext(path))]
	if !known {
		detected, _, _ := strings.Cut(http.DetectContentType(data), ";")
		if mt, known = sniffedTypes[detected]; !known {
			return events.Part{}, fmt.Errorf("%w: --attach %s: %s is not a type a model is sent (images: %s; files: %s)",
				ErrUsage, path, detected, strings.Join(events.ImageMediaTypes, ", "), strings.Join(events.FileMediaTypes, ", "))
		}
	}
	var p events.Part
	if slices.Contains(events.ImageMediaTypes, mt) {
		p = events.ImagePart(mt, data)
	} else {
		p = events.FilePart(mt, filepath.Base(path), data)
	}
	if err := p.Validate(); err != nil {
		var fe *events.FieldError
		if errors.As(err, &fe) {
			err = errors.New(fe.Problem)
		}
		return events.Part{}, fmt.Errorf("%w: --attach %s (%s): %v", ErrUsage, path, mt, err)
	}
	return p, nil
}

// attachTo adds the files' parts to msgs: before the text of the last user
// message, or as a user message of their own when the last message is
// not the user's.
func attachTo(msgs []events.Message, paths []string) ([]events.Message, error) {
	if len(paths) == 0 {
		return msgs, nil
	}
	parts := make([]events.Part, 0, len(paths))
	for _, p := range paths {
		part, err := attachmentPart(p)
		if err != nil {
			return nil, err
		}
		parts = append(parts, part)
	}
	if n := len(msgs); n > 0 && msgs[n-1].Role == events.RoleUser {
		msgs[n-1].Content = append(parts, msgs[n-1].Content...)
		return msgs, nil
	}
	return append(msgs, events.Message{Role: events.RoleUser, Content: parts}), nil
}

// uploadLarge stores the media parts of msgs above
// events.InlineMediaLimit in LLMW_MEDIA and puts their refs in their
// place: a turn request must fit a NATS message.
func uploadLarge(ctx context.Context, js jetstream.JetStream, msgs []events.Message) error {
	if !media.NeedsOffload(msgs, 0) {
		return nil
	}
	st, err := media.Open(ctx, js)
	if err != nil {
		return fmt.Errorf("upload attachments: %w (run llmworker provision: it creates %s)", err, events.BucketMedia)
	}
	if _, err := st.Offload(ctx, msgs, 0); err != nil {
		return fmt.Errorf("upload attachments: %w", err)
	}
	return nil
}

var schemaNameRE = regexp.MustCompile(`[^a-zA-Z0-9_-]+`)

// schemaFormat reads a JSON Schema file into a json_schema response
// format named after the file ("answer.schema.json" → "answer").
func schemaFormat(path string) (*events.ResponseFormat, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: --schema %s: %v", ErrUsage, path, err)
	}
	b = bytes.TrimSpace(b)
	if len(b) == 0 || b[0] != '{' || !json.Valid(b) {
		return nil, fmt.Errorf("%w: --schema %s: not a JSON Schema object", ErrUsage, path)
	}
	name := filepath.Base(path)
	for _, ext := range []string{".json", ".schema"} {
		name = strings.TrimSuffix(name, ext)
	}
	name = strings.Trim(schemaNameRE.ReplaceAllString(name, "_"), "_")
	if len(name) > 64 {
		name = name[:64]
	}
	return &events.ResponseFormat{Type: events.FormatJSONSchema, Name: name, Schema: json.RawMessage(b)}, nil
}
