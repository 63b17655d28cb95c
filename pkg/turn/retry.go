package turn

import (
	"context"
	"time"

	"github.com/nats-io/nats.go"
)

// retrier paces the attempts of one request to NATS that failed for a
// reason that may pass (a stream electing its leader, no quorum, a
// connection reconnecting): every retry loop of the package (casRetry,
// resolvePinned, watchChild, submitChild, readChildAnswer) waits with
// it, for at most the publisher's RetryTimeout (Config.RetryTimeout),
// which bounds the turn's events the same way.
type retrier struct {
	nc       *nats.Conn
	deadline time.Time
	backoff  time.Duration
}

func (s *Service) retrier() *retrier {
	return &retrier{nc: s.nc, deadline: time.Now().Add(s.pub.RetryTimeout()), backoff: 50 * time.Millisecond}
}

// again waits before the next attempt and reports whether to make it:
// not when ctx ends first, when the attempt would start after the
// deadline, or when the connection is closed. A closed nats.Conn (Close,
// or its reconnects used up) never connects again and fails every
// request at once (nats.ErrConnectionClosed): retrying would only keep
// the run from ending, and so the turn from a replica that reaches NATS
// (its request is delivered again).
func (r *retrier) again(ctx context.Context) bool {
	if r.nc.IsClosed() || ctx.Err() != nil || time.Now().Add(r.backoff).After(r.deadline) {
		return false
	}
	t := time.NewTimer(r.backoff)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
	}
	r.backoff = min(2*r.backoff, time.Second)
	return !r.nc.IsClosed()
}
