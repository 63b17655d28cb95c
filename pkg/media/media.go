package media

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/llmworker/llmworker/pkg/events"
)

const bucket = events.BucketMedia

// MaxSize bounds one media object: 64 MiB, above every provider's limit
// for one image or document (Anthropic's PDF limit is 32 MB per request,
// Gemini's inline data 20 MB, OpenAI's file input 50 MB).
const MaxSize = 64 << 20

// Ref returns the content address of data: "sha256:" and its hex digest.
func Ref(data []byte) string {
	sum := sha256.Sum256(data)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// objectName is the object's name in the bucket: the hex digest.
func objectName(ref string) (string, error) {
	if !events.ValidMediaRef(ref) {
		return "", fmt.Errorf("%w: %q (want sha256:<64 lowercase hex digits>)", ErrInvalidRef, ref)
	}
	return strings.TrimPrefix(ref, "sha256:"), nil
}

// Store reads and writes media objects. It is safe for concurrent use.
type Store struct {
	obs jetstream.ObjectStore
}

// New returns a Store over an opened LLMW_MEDIA object store.
func New(obs jetstream.ObjectStore) *Store { return &Store{obs: obs} }

// Open opens the LLMW_MEDIA bucket, which provision.Provision creates.
func Open(ctx context.Context, js jetstream.JetStream) (*Store, error) {
	obs, err := js.ObjectStore(ctx, bucket)
	if err != nil {
		return nil, fmt.Errorf("media: open bucket %s: %w", bucket, err)
	}
	return New(obs), nil
}

// Put stores data once and returns its ref: an object that is stored
// already under the same digest is not written again.
func (s *Store) Put(ctx context.Context, data []byte, mediaType string) (string, error) {
	if len(data) > MaxSize {
		return "", fmt.Errorf("%w: %d bytes, more than %d", ErrTooLarge, len(data), MaxSize)
	}
	ref := Ref(data)
	name, _ := objectName(ref)
	if info, err := s.obs.GetInfo(ctx, name); err == nil && !info.Deleted && info.Size == uint64(len(data)) {
		return ref, nil
	} else if err != nil && !errors.Is(err, jetstream.ErrObjectNotFound) {
		return "", fmt.Errorf("media: look up %s: %w", ref, err)
	}
	meta := jetstream.ObjectMeta{Name: name, Headers: map[string][]string{"Content-Type": {mediaType}}}
	if _, err := s.obs.Put(ctx, meta, bytes.NewReader(data)); err != nil {
		return "", fmt.Errorf("media: store %s (%d bytes): %w", ref, len(data), err)
	}
	return ref, nil
}

// Get returns the bytes stored under ref, checked against it.
func (s *Store) Get(ctx context.Context, ref string) ([]byte, error) {
	name, err := objectName(ref)
	if err != nil {
		return nil, err
	}
	data, err := s.obs.GetBytes(ctx, name)
	if errors.Is(err, jetstream.ErrObjectNotFound) {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, ref)
	}
	if err != nil {
		return nil, fmt.Errorf("media: read %s: %w", ref, err)
	}
	if Ref(data) != ref {
		return nil, fmt.Errorf("%w: %s", ErrCorrupt, ref)
	}
	return data, nil
}

// Offload stores every inline image or file part of msgs whose bytes are
// larger than limit (0 = events.InlineMediaLimit), tool results' parts
// included, and replaces its data with the ref and size, in place. It
// returns how many parts it moved. A part whose data is not base64 is left
// for validation to refuse.
func (s *Store) Offload(ctx context.Context, msgs []events.Message, limit int) (int, error) {
	n := 0
	for i := range msgs {
		m, err := s.OffloadParts(ctx, msgs[i].Content, limit)
		n += m
		if err != nil {
			return n, fmt.Errorf("messages[%d]: %w", i, err)
		}
	}
	return n, nil
}

// OffloadParts is Offload for one list of parts (a message's content or a
// tool result's).
func (s *Store) OffloadParts(ctx context.Context, parts []events.Part, limit int) (int, error) {
	if limit <= 0 {
		limit = events.InlineMediaLimit
	}
	n := 0
	for j := range parts {
		p := &parts[j]
		if p.Type == events.PartToolResult {
			m, err := s.OffloadParts(ctx, p.Parts, limit)
			n += m
			if err != nil {
				return n, fmt.Errorf("content[%d].%w", j, err)
			}
			continue
		}
		// base64 is 4/3 of the bytes: compare without decoding small parts.
		if !p.IsMedia() || p.Data == "" || base64.StdEncoding.DecodedLen(len(p.Data)) <= limit {
			continue
		}
		data, err := p.Bytes()
		if err != nil || len(data) <= limit {
			continue
		}
		ref, err := s.Put(ctx, data, p.MediaType)
		if err != nil {
			return n, fmt.Errorf("content[%d]: %w", j, err)
		}
		p.Data, p.Ref, p.Size = "", ref, int64(len(data))
		n++
	}
	return n, nil
}

// NeedsOffload reports whether Offload would move any part of msgs: an
// inline image or file part whose base64 decodes to more than limit (0 =
// events.InlineMediaLimit) bytes. It reads no data.
func NeedsOffload(msgs []events.Message, limit int) bool {
	if limit <= 0 {
		limit = events.InlineMediaLimit
	}
	for i := range msgs {
		if partsNeedOffload(msgs[i].Content, limit) {
			return true
		}
	}
	return false
}

func partsNeedOffload(parts []events.Part, limit int) bool {
	for j := range parts {
		p := &parts[j]
		if p.IsMedia() && base64.StdEncoding.DecodedLen(len(p.Data)) > limit || partsNeedOffload(p.Parts, limit) {
			return true
		}
	}
	return false
}

// Getter reads the bytes of a ref: a *Store, or a test's map.
type Getter interface {
	Get(ctx context.Context, ref string) ([]byte, error)
}

var _ Getter = (*Store)(nil)

// HasRefs reports whether any part of msgs (tool results' parts included)
// holds its media as a ref.
func HasRefs(msgs []events.Message) bool {
	for i := range msgs {
		if partsHaveRefs(msgs[i].Content) {
			return true
		}
	}
	return false
}

func partsHaveRefs(parts []events.Part) bool {
	for j := range parts {
		if parts[j].Ref != "" || partsHaveRefs(parts[j].Parts) {
			return true
		}
	}
	return false
}

// Resolve returns msgs with every ref part replaced by a part holding its
// bytes as data. msgs are not modified: the messages and part lists that
// hold a ref are copied, the others shared. A ref that cannot be used is
// a *RefError naming the part (messages[i].content[j].ref, or .size): one
// the store does not hold (ErrNotFound), bytes that do not hash to the ref
// or whose length is not the part's size (ErrCorrupt), bytes that are not
// of the part's media_type (ErrMediaType).
func Resolve(ctx context.Context, g Getter, msgs []events.Message) ([]events.Message, error) {
	if !HasRefs(msgs) {
		return msgs, nil
	}
	out := make([]events.Message, len(msgs))
	for i := range msgs {
		out[i] = msgs[i]
		parts, err := resolveParts(ctx, g, msgs[i].Content, "messages["+strconv.Itoa(i)+"].content")
		if err != nil {
			return nil, err
		}
		out[i].Content = parts
	}
	return out, nil
}

func resolveParts(ctx context.Context, g Getter, parts []events.Part, field string) ([]events.Part, error) {
	if !partsHaveRefs(parts) {
		return parts, nil
	}
	out := make([]events.Part, len(parts))
	copy(out, parts)
	for j := range out {
		p := &out[j]
		f := field + "[" + strconv.Itoa(j) + "]"
		if p.Parts != nil {
			sub, err := resolveParts(ctx, g, p.Parts, f+".content")
			if err != nil {
				return nil, err
			}
			p.Parts = sub
		}
		if p.Ref == "" {
			continue
		}
		data, err := g.Get(ctx, p.Ref)
		if err != nil {
			return nil, &RefError{Field: f + ".ref", Ref: p.Ref, Err: err}
		}
		if p.Size > 0 && int64(len(data)) != p.Size {
			return nil, &RefError{Field: f + ".size", Ref: p.Ref, Err: fmt.Errorf("%w: %d bytes stored, the part says %d", ErrCorrupt, len(data), p.Size)}
		}
		// A ref's bytes were never validated: a client uploads them
		// itself, under any media_type it then names.
		if holds, ok := events.MatchMedia(p.MediaType, data); !ok {
			return nil, &RefError{Field: f + ".ref", Ref: p.Ref, Err: fmt.Errorf("%w: holds %s, not %s", ErrMediaType, holds, p.MediaType)}
		}
		p.Data, p.Ref, p.Size = base64.StdEncoding.EncodeToString(data), "", 0
	}
	return out, nil
}

// RefError names the part whose ref could not be resolved.
type RefError struct {
	// Field is the part's path, e.g. "messages[0].content[1].ref".
	Field string
	Ref   string
	Err   error
}

func (e *RefError) Error() string { return fmt.Sprintf("%s: %s: %v", e.Field, e.Ref, e.Err) }

// Unwrap returns the cause (ErrNotFound, ErrCorrupt, ErrInvalidRef, …).
func (e *RefError) Unwrap() error { return e.Err }

// Lazy opens the LLMW_MEDIA store on the first call of Store and keeps it:
// a service that never meets large media needs no bucket. The zero value
// with JS set is ready; it is safe for concurrent use.
type Lazy struct {
	JS jetstream.JetStream

	mu sync.Mutex
	st *Store
}

// Store returns the opened store, opening it on the first call (a failed
// open is tried again by the next call).
func (l *Lazy) Store(ctx context.Context) (*Store, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.st == nil {
		st, err := Open(ctx, l.JS)
		if err != nil {
			return nil, err
		}
		l.st = st
	}
	return l.st, nil
}
