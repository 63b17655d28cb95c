package events

import (
	"bytes"
	"encoding/base64"
	"net/url"
	"regexp"
	"strings"
	"unicode/utf8"
)

// The part types that carry media (docs/protocol.md §4). An image or file
// part holds its bytes in exactly one of three ways: Data (base64, in the
// message), URL (https, fetched by the provider) or Ref (a content address
// in the LLMW_MEDIA object store, resolved by ingest when it builds the
// provider request).
const (
	PartImage PartType = "image"
	PartFile  PartType = "file"
)

// InlineMediaLimit is the size of a media part's bytes above which the
// services store them once in the LLMW_MEDIA object store and carry a Ref
// instead: a transcript is written at every step (checkpoint, completion
// request, session), and a NATS message holds 1 MiB by default.
const InlineMediaLimit = 256 << 10

// ImageMediaTypes are the media types an image part may have: the ones
// every provider with image input reads.
var ImageMediaTypes = []string{"image/png", "image/jpeg", "image/gif", "image/webp"}

// FileMediaTypes are the media types a file part may have. Which of them a
// provider reads is the adapter's to say: a part it cannot send is refused
// with ErrUnsupportedContent (code unsupported_content) before the call.
var FileMediaTypes = []string{
	"application/pdf",
	"text/plain", "text/markdown", "text/csv", "text/html", "application/json",
	"audio/wav", "audio/mpeg", "audio/ogg", "audio/flac", "audio/aac", "audio/webm",
}

var refRE = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

// ValidMediaRef reports whether ref is a content address of the LLMW_MEDIA
// bucket: "sha256:" and 64 lowercase hex digits.
func ValidMediaRef(ref string) bool { return refRE.MatchString(ref) }

// ImagePart returns an image part with base64 data.
func ImagePart(mediaType string, data []byte) Part {
	return Part{Type: PartImage, MediaType: mediaType, Data: base64.StdEncoding.EncodeToString(data)}
}

// ImageURLPart returns an image part the provider fetches from url.
func ImageURLPart(mediaType, url string) Part {
	return Part{Type: PartImage, MediaType: mediaType, URL: url}
}

// FilePart returns a file part with base64 data.
func FilePart(mediaType, filename string, data []byte) Part {
	return Part{Type: PartFile, MediaType: mediaType, Filename: filename, Data: base64.StdEncoding.EncodeToString(data)}
}

// IsMedia reports whether p is an image or file part.
func (p *Part) IsMedia() bool { return p.Type == PartImage || p.Type == PartFile }

// Bytes decodes the part's inline data. It returns nil for a part with a
// URL or a Ref.
func (p *Part) Bytes() ([]byte, error) {
	if p.Data == "" {
		return nil, nil
	}
	b, err := base64.StdEncoding.DecodeString(p.Data)
	if err != nil {
		return nil, invalidf("data", "must be standard base64: %v", err)
	}
	return b, nil
}

// validateMedia checks an image or file part: exactly one source, a media
// type of its kind, base64 whose bytes are of that type, an https URL, a
// well-formed ref.
func (p *Part) validateMedia() error {
	mt := strings.ToLower(strings.TrimSpace(p.MediaType))
	if mt == "" {
		return missing("media_type")
	}
	allowed := FileMediaTypes
	if p.Type == PartImage {
		allowed = ImageMediaTypes
	}
	if !contains(allowed, mt) {
		return invalidf("media_type", "must be one of %s for a %s part, got %q", strings.Join(allowed, ", "), p.Type, p.MediaType)
	}
	n := 0
	for _, s := range []string{p.Data, p.URL, p.Ref} {
		if s != "" {
			n++
		}
	}
	if n != 1 {
		return invalidf("data", "a %s part needs exactly one of data, url and ref, got %d", p.Type, n)
	}
	switch {
	case p.Data != "":
		b, err := p.Bytes()
		if err != nil {
			return err
		}
		if len(b) == 0 {
			return invalidf("data", "is empty")
		}
		if kind, ok := MatchMedia(mt, b); !ok {
			return invalidf("data", "holds %s, not %s", kind, mt)
		}
	case p.URL != "":
		u, err := url.Parse(p.URL)
		if err != nil || u.Host == "" {
			return invalidf("url", "must be an absolute https URL, got %q", p.URL)
		}
		if u.Scheme != "https" {
			return invalidf("url", "must use https, got scheme %q", u.Scheme)
		}
	default:
		if !ValidMediaRef(p.Ref) {
			return invalidf("ref", "must be sha256:<64 lowercase hex digits>, got %q", p.Ref)
		}
		if p.Size < 0 {
			return invalidf("size", "must not be negative")
		}
	}
	return nil
}

// MatchMedia reports whether the bytes b are what mediaType says, by the
// check validation makes of a part's inline data (the signature of an
// image, PDF or audio container; UTF-8 for text types), and names what b
// holds ("image/png", "text", …) for the error of a mismatch. pkg/media
// makes the same check of a ref's bytes when it resolves the ref.
func MatchMedia(mediaType string, b []byte) (holds string, ok bool) {
	kind := sniffMedia(b)
	return kind, mediaMatches(strings.ToLower(strings.TrimSpace(mediaType)), kind, b)
}

// sniffMedia names the kind of b from its first bytes, for the error of a
// mismatch: an image or PDF signature, text, or unknown binary.
func sniffMedia(b []byte) string {
	switch {
	case bytes.HasPrefix(b, []byte("\x89PNG\r\n\x1a\n")):
		return "image/png"
	case bytes.HasPrefix(b, []byte("\xff\xd8\xff")):
		return "image/jpeg"
	case bytes.HasPrefix(b, []byte("GIF87a")), bytes.HasPrefix(b, []byte("GIF89a")):
		return "image/gif"
	case len(b) >= 12 && string(b[:4]) == "RIFF" && string(b[8:12]) == "WEBP":
		return "image/webp"
	case len(b) >= 12 && string(b[:4]) == "RIFF" && string(b[8:12]) == "WAVE":
		return "audio/wav"
	case bytes.HasPrefix(b, []byte("%PDF-")):
		return "application/pdf"
	case bytes.HasPrefix(b, []byte("OggS")):
		return "audio/ogg"
	case bytes.HasPrefix(b, []byte("fLaC")):
		return "audio/flac"
	case bytes.HasPrefix(b, []byte("ID3")), len(b) >= 2 && b[0] == 0xff && b[1]&0xe0 == 0xe0 && b[1]&0x06 != 0:
		return "audio/mpeg"
	case bytes.HasPrefix(b, []byte("\x1a\x45\xdf\xa3")):
		return "audio/webm"
	case utf8.Valid(b):
		return "text"
	}
	return "binary data of an unknown kind"
}

// mediaMatches reports whether bytes sniffed as kind may be declared as
// mediaType. Formats with a signature must have it; text types must be
// UTF-8; AAC (no reliable signature) is taken as declared when binary.
func mediaMatches(mediaType, kind string, b []byte) bool {
	switch {
	case strings.HasPrefix(mediaType, "text/"), mediaType == "application/json":
		return kind == "text"
	case mediaType == "audio/aac":
		return kind != "text"
	}
	return kind == mediaType
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
