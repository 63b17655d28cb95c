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
// first request that needs it (media.Lazy).
func (s *Service) offloadMedia(ctx context.Context, msgs []events.Message) error {
	if !media.NeedsOffload(msgs, 0) {
		return nil
	}
	st, err := s.media.Store(ctx)
	if err != nil {
		return fmt.Errorf("turn: %w", err)
	}
	_, err = st.Offload(ctx, msgs, 0)
	return err
}
