package turn

import (
	"context"
	"fmt"
	"time"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/media"
)

// mediaTimeout bounds storing a request's media: up to media.MaxSize per
// part, in 128 KiB chunks, each acknowledged by the stream.
const mediaTimeout = time.Minute

// offloadMedia moves the inline image and file parts of msgs that are
// larger than events.InlineMediaLimit into the LLMW_MEDIA object store
// and leaves their refs in place (media.Store.Offload), so that the
// checkpoint, the session and every completion request of the turn carry
// the ref, not the bytes; ingest resolves it. The store is opened on the
// first request that needs it: an installation that never sees large
// media needs no LLMW_MEDIA bucket.
func (s *Service) offloadMedia(ctx context.Context, msgs []events.Message) error {
	if !media.NeedsOffload(msgs, 0) {
		return nil
	}
	st, err := s.mediaStore(ctx)
	if err != nil {
		return err
	}
	_, err = st.Offload(ctx, msgs, 0)
	return err
}

func (s *Service) mediaStore(ctx context.Context) (*media.Store, error) {
	s.mediaMu.Lock()
	defer s.mediaMu.Unlock()
	if s.media == nil {
		st, err := media.Open(ctx, s.js)
		if err != nil {
			return nil, fmt.Errorf("turn: %w", err)
		}
		s.media = st
	}
	return s.media, nil
}
