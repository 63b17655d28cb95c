package ingest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"
	"github.com/nats-io/nuid"

	"github.com/llmworker/llmworker/pkg/events"
)

// A completion request whose data does not fit one NATS message (a long
// transcript on a server of 1 MiB max_payload) travels through the
// LLMW_REQUESTS object store: the requester stores the data as an object
// and sends the request's headers with no data and the object's name in
// the Llmw-Request-Object header; ingest reads the object before it
// validates the request (docs/protocol.md §3, "Completion request").
// Requests that fit are sent as they are, with no extra round trip.

// RequestHeadroom is what a Client leaves of the connection's max payload
// for a request's headers: a request whose data is longer than the max
// payload less this is stored in LLMW_REQUESTS.
const RequestHeadroom = 4 << 10

// DefaultMaxStoredRequest bounds the data of a stored request ingest
// reads (Config.MaxStoredRequest): 64 MiB, far above the 1M-token
// context window of the largest models (about 4 MB of text).
const DefaultMaxStoredRequest = 64 << 20

// maxChunk is the object store's default chunk size, which a server of a
// smaller max payload could not take.
const maxChunk = 128 << 10

// storedReadTimeout bounds ingest's read of a stored request.
const storedReadTimeout = time.Minute

// objects opens LLMW_REQUESTS on first use and keeps it: a requester or
// ingest that never meets a large request needs no bucket.
type objects struct {
	js    jetstream.JetStream
	jsErr error

	mu  sync.Mutex
	obs jetstream.ObjectStore
}

func (o *objects) open(ctx context.Context) (jetstream.ObjectStore, error) {
	if o.jsErr != nil {
		return nil, o.jsErr
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.obs == nil {
		obs, err := o.js.ObjectStore(ctx, events.BucketRequests)
		if err != nil {
			return nil, fmt.Errorf("object store %s: %w", events.BucketRequests, err)
		}
		o.obs = obs
	}
	return o.obs, nil
}

// storeLimit is the longest request data a Client sends in the message
// itself (no limit while the connection knows no max payload).
func (c *Client) storeLimit() int {
	mp := int(c.nc.MaxPayload())
	if mp <= 0 {
		return math.MaxInt
	}
	return mp - RequestHeadroom
}

// storeRequest stores m's data in LLMW_REQUESTS under a name of its own
// and leaves m carrying the name instead; it returns the name.
func (c *Client) storeRequest(ctx context.Context, reqID string, m *nats.Msg) (string, error) {
	obs, err := c.requests.open(ctx)
	if err != nil {
		return "", fmt.Errorf("%w: %d bytes: %w (run llmworker provision)", ErrRequestStore, len(m.Data), err)
	}
	name := reqID + "." + nuid.Next()
	chunk := uint32(min(maxChunk, max(c.storeLimit(), 1<<10))) // the object store's default chunk would not fit a smaller max payload
	meta := jetstream.ObjectMeta{Name: name, Opts: &jetstream.ObjectMetaOptions{ChunkSize: chunk}}
	if _, err := obs.Put(ctx, meta, bytes.NewReader(m.Data)); err != nil {
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		return "", fmt.Errorf("%w: %d bytes as %s/%s: %w", ErrRequestStore, len(m.Data), events.BucketRequests, name, err)
	}
	m.Header.Set(events.HeaderRequestObject, name)
	m.Data = nil
	return name, nil
}

// deleteRequest deletes a stored request once ingest has answered (it
// read the object before it answered) or the request failed; what a
// failed delete leaves, the bucket's TTL removes.
func (c *Client) deleteRequest(ctx context.Context, name string) {
	obs, err := c.requests.open(ctx)
	if err != nil {
		return
	}
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_ = obs.Delete(dctx, name)
}

// handleStored takes a request whose data is the object name of
// LLMW_REQUESTS: it reads the object on a goroutine of its own, which the
// service's drain waits for, so that a large read does not hold the
// endpoint's other requests, and then admits the request as one that came
// whole.
func (s *Service) handleStored(mr micro.Request, name string) {
	h := maps.Clone(map[string][]string(mr.Headers()))
	reply := mr.Reply()
	s.mu.Lock()
	if s.state != stateRunning {
		s.mu.Unlock()
		s.refuse(mr, nil, newError(KindShuttingDown, "ingest instance "+s.cfg.Instance+" is shutting down; retry", nil))
		return
	}
	s.wg.Add(1)
	base := s.base
	s.mu.Unlock()
	go func() {
		defer s.wg.Done()
		refuse := func(r *request, e *Error) { s.refuseLate(reply, r, e) }
		data, err := s.readStored(base, name)
		if err != nil {
			refuse(nil, err)
			return
		}
		s.admit(h, data, s.maxStoredRequest(), reply, refuse)
	}()
}

func (s *Service) maxStoredRequest() int {
	if s.cfg.MaxStoredRequest > 0 {
		return s.cfg.MaxStoredRequest
	}
	return DefaultMaxStoredRequest
}

// readStored reads the data of the stored request name. An object the
// bucket does not hold (expired, deleted, never stored) is the
// requester's error, naming it.
func (s *Service) readStored(ctx context.Context, name string) ([]byte, *Error) {
	ctx, cancel := context.WithTimeout(ctx, storedReadTimeout)
	defer cancel()
	where := fmt.Sprintf("request object %q of %s", name, events.BucketRequests)
	obs, err := s.requests.open(ctx)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		e := newError(KindInvalidRequest, where+": the object store does not exist (run llmworker provision)", err)
		e.Field = events.HeaderRequestObject
		return nil, e
	}
	if err != nil {
		return nil, newError(KindUnavailable, where+": "+err.Error(), err)
	}
	res, err := obs.Get(ctx, name)
	if errors.Is(err, jetstream.ErrObjectNotFound) {
		e := newError(KindInvalidRequest, where+" is not stored: it expired or was deleted before ingest read it", err)
		e.Field = events.HeaderRequestObject
		return nil, e
	}
	if err != nil {
		return nil, newError(KindUnavailable, where+": "+err.Error(), err)
	}
	defer res.Close()
	info, err := res.Info()
	if err != nil {
		return nil, newError(KindUnavailable, where+": "+err.Error(), err)
	}
	if limit := s.maxStoredRequest(); info.Size > uint64(limit) {
		return nil, newError(KindPayloadTooLarge, fmt.Sprintf("%s is %d bytes, the limit is %d", where, info.Size, limit), nil)
	}
	data, err := io.ReadAll(res)
	if errors.Is(err, jetstream.ErrDigestMismatch) {
		return nil, newError(KindInvalidRequest, where+" is corrupt: "+err.Error(), err)
	}
	if err != nil {
		return nil, newError(KindUnavailable, where+": "+err.Error(), err)
	}
	return data, nil
}
