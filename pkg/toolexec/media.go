package toolexec

import (
	"context"
	"fmt"
	"time"

	"github.com/llmworker/llmworker/pkg/events"
	"github.com/llmworker/llmworker/pkg/media"
)

// mediaTimeout bounds storing one result's media (up to media.MaxSize per
// part, in 128 KiB chunks).
const mediaTimeout = time.Minute

// offloadMedia stores a result's image and file parts above
// events.InlineMediaLimit in the LLMW_MEDIA object store and leaves their
// refs in the parts (media.Store.OffloadParts): the result, the turn's
// transcript and every later model call then carry the ref, and ingest
// reads the bytes back for the provider. The store is opened by the first
// result that needs it.
func (s *Server) offloadMedia(parts []events.Part) error {
	if !media.NeedsOffload([]events.Message{{Content: parts}}, 0) {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), mediaTimeout)
	defer cancel()
	st, err := s.media.Store(ctx)
	if err != nil {
		return err
	}
	if _, err := st.OffloadParts(ctx, parts, 0); err != nil {
		return fmt.Errorf("store media: %w", err)
	}
	return nil
}
