package turn

import (
	"context"
	"fmt"
	"slices"

	"github.com/llmworker/llmworker/pkg/tool"
)

// selectTools returns the tools a request's patterns name: "*" is every
// tool (in-process and catalog), a name is that tool. A name that is
// neither in Config.Tools nor in the catalog is an ErrUnknownTool.
func (s *Service) selectTools(ctx context.Context, patterns []string) ([]tool.Tool, error) {
	if patterns == nil {
		patterns = s.cfg.DefaultTools
	}
	if len(patterns) == 0 {
		return nil, nil
	}
	picked := map[string]tool.Tool{}
	for _, p := range patterns {
		if p == "*" {
			for _, t := range s.cfg.Tools {
				picked[t.Name()] = t
			}
			if s.catalog != nil {
				for _, e := range s.catalog.Entries() {
					if _, local := s.local[e.Name]; !local {
						picked[e.Name] = s.tools.Tool(e)
					}
				}
			}
			continue
		}
		if _, ok := picked[p]; ok {
			continue
		}
		if t, ok := s.local[p]; ok {
			picked[p] = t
			continue
		}
		if s.catalog != nil {
			if e, ok := s.catalog.Get(p); ok {
				picked[p] = s.tools.Tool(e)
				continue
			}
		}
		// The watcher may lag behind a toolexec that just started: ask KV.
		if s.cat != nil {
			if e, err := s.cat.Get(ctx, p); err == nil {
				picked[p] = s.tools.Tool(e)
				continue
			}
		}
		return nil, fmt.Errorf("%w %q: it is neither in the tool catalog (KV %s) nor hosted by the turn service; is a toolexec hosting it running?",
			ErrUnknownTool, p, "LLMW_TOOLS")
	}
	out := make([]tool.Tool, 0, len(picked))
	for _, t := range picked {
		out = append(out, t)
	}
	slices.SortFunc(out, func(a, b tool.Tool) int {
		switch {
		case a.Name() < b.Name():
			return -1
		case a.Name() > b.Name():
			return 1
		}
		return 0
	})
	return out, nil
}
