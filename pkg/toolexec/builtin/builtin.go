package builtin

import (
	"context"
	"fmt"
	"time"
	_ "time/tzdata" // current_time works in minimal images without zoneinfo

	"github.com/llmworker/llmworker/pkg/tool"
)

// Config configures the built-in tools. The zero value gives current_time
// and calculator only: file tools need a Root.
type Config struct {
	// Root is the directory read_file and list_dir are confined to; ""
	// leaves them out (safe by default).
	Root string
	// MaxFileBytes caps what read_file returns (0 = DefaultMaxFileBytes).
	MaxFileBytes int64
	// MaxDirEntries caps what list_dir returns (0 = DefaultMaxDirEntries).
	MaxDirEntries int
	// Now is the clock of current_time (nil = time.Now).
	Now func() time.Time
}

// Tools returns the built-in tools Config enables.
func Tools(cfg Config) ([]tool.Tool, error) {
	ts := []tool.Tool{CurrentTime(cfg.Now), Calculator()}
	if cfg.Root != "" {
		fts, err := FileTools(cfg)
		if err != nil {
			return nil, err
		}
		ts = append(ts, fts...)
	}
	return ts, nil
}

// CurrentTimeArgs is the input of current_time.
type CurrentTimeArgs struct {
	Timezone string `json:"timezone,omitempty" description:"IANA time zone name, e.g. Asia/Tokyo or America/New_York; default UTC"`
}

// CurrentTimeResult is the output of current_time.
type CurrentTimeResult struct {
	Time     string `json:"time"`
	Timezone string `json:"timezone"`
	Weekday  string `json:"weekday"`
	Unix     int64  `json:"unix"`
}

// CurrentTime returns the current_time tool (now nil = time.Now).
func CurrentTime(now func() time.Time) tool.Tool {
	if now == nil {
		now = time.Now
	}
	return tool.Must("current_time",
		"Returns the current date and time (RFC 3339) in a time zone, with the weekday and the Unix time.",
		func(_ context.Context, a CurrentTimeArgs) (CurrentTimeResult, error) {
			name := a.Timezone
			if name == "" {
				name = "UTC"
			}
			loc, err := time.LoadLocation(name)
			if err != nil || name == "Local" {
				return CurrentTimeResult{}, &tool.InvalidArgumentError{Tool: "current_time", Problems: []tool.Problem{{
					Field: "timezone", Message: fmt.Sprintf("unknown time zone %q; use an IANA name such as Europe/Paris", a.Timezone),
				}}}
			}
			t := now().In(loc)
			return CurrentTimeResult{Time: t.Format(time.RFC3339), Timezone: name, Weekday: t.Weekday().String(), Unix: t.Unix()}, nil
		}, tool.WithVersion("1"))
}
