package quota

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// Defaults of Limits.
const (
	DefaultWindow   = time.Minute
	DefaultLeaseTTL = 30 * time.Second
	DefaultMaxQueue = 1000
	DefaultMaxWait  = time.Minute
	DefaultCooldown = 10 * time.Second
	// MaxCooldown bounds what a Retry-After can stop.
	MaxCooldown = 10 * time.Minute
)

// ConfigKey is the bucket key whose limits (YAML or JSON, as Parse reads
// them) every replica applies in place of its own while it exists.
const ConfigKey = "config"

const (
	slotsPerWindow = 10
	minLeaseTTL    = 100 * time.Millisecond
	minWindow      = 10 * time.Millisecond
	stateKeyPrefix = "state."
)

// Limits is the configuration every replica applies: a file (Parse) or
// the bucket's config key, which replaces the file's on every replica
// while it exists. The zero value limits nothing.
type Limits struct {
	// Window is the period of the per-minute limits (0 = DefaultWindow): a
	// minute in production, shorter in tests.
	Window time.Duration `yaml:"window" json:"window,omitempty"`
	// LeaseTTL is how long a replica's hold on a concurrent call lasts
	// without renewal (0 = DefaultLeaseTTL): a replica that dies frees its
	// calls at most this long after its last renewal. A running call
	// renews its lease every LeaseTTL/3.
	LeaseTTL time.Duration `yaml:"lease_ttl" json:"lease_ttl,omitempty"`
	// MaxQueue bounds the calls that wait for one limit on one replica
	// (0 = DefaultMaxQueue); one more fails with ErrQueueFull.
	MaxQueue int `yaml:"max_queue" json:"max_queue,omitempty"`
	// MaxWait bounds how long a call waits (0 = DefaultMaxWait); it should
	// stay under the requester's reply timeout (ingest.DefaultRequestTimeout).
	MaxWait time.Duration `yaml:"max_wait" json:"max_wait,omitempty"`
	// Cooldown is how long a 429 without Retry-After stops a limit's calls
	// (0 = DefaultCooldown).
	Cooldown time.Duration `yaml:"cooldown" json:"cooldown,omitempty"`
	// Limits are the limits; a call is held to every one that matches it.
	Limits []Limit `yaml:"limits" json:"limits,omitempty"`
}

// Limit is one quota. Key names it and, unless Match is set, says which
// calls it covers: a provider ("anthropic") covers every model of it, a
// model string ("anthropic:claude-sonnet-4-5") one model. A limit of a
// credential (an API key several models share) names the credential in
// Key and lists the providers and model strings that use it in Match.
// Zero means no limit of that kind.
type Limit struct {
	Key               string   `yaml:"key" json:"key"`
	Match             []string `yaml:"match" json:"match,omitempty"`
	Concurrent        int      `yaml:"concurrent" json:"concurrent,omitempty"`
	RequestsPerMinute int      `yaml:"requests_per_minute" json:"requests_per_minute,omitempty"`
	TokensPerMinute   int64    `yaml:"tokens_per_minute" json:"tokens_per_minute,omitempty"`
}

// Parse reads limits from YAML or JSON (JSON is YAML); durations are Go
// durations ("1m", "30s").
func Parse(data []byte) (Limits, error) {
	var l Limits
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&l); err != nil && !errors.Is(err, io.EOF) {
		return Limits{}, fmt.Errorf("%w: %v", ErrInvalidLimits, err)
	}
	if err := l.Validate(); err != nil {
		return Limits{}, err
	}
	return l, nil
}

// Validate reports the first field that cannot be applied.
func (l Limits) Validate() error {
	bad := func(field, format string, a ...any) error {
		return fmt.Errorf("%w: %s: %s", ErrInvalidLimits, field, fmt.Sprintf(format, a...))
	}
	switch {
	case l.Window < 0 || (l.Window > 0 && l.Window < minWindow):
		return bad("window", "must be at least %v, got %v", minWindow, l.Window)
	case l.LeaseTTL < 0 || (l.LeaseTTL > 0 && l.LeaseTTL < minLeaseTTL):
		return bad("lease_ttl", "must be at least %v, got %v", minLeaseTTL, l.LeaseTTL)
	case l.MaxQueue < 0:
		return bad("max_queue", "must not be negative, got %d", l.MaxQueue)
	case l.MaxWait < 0:
		return bad("max_wait", "must not be negative, got %v", l.MaxWait)
	case l.Cooldown < 0:
		return bad("cooldown", "must not be negative, got %v", l.Cooldown)
	}
	seen := map[string]bool{}
	for i, x := range l.Limits {
		f := fmt.Sprintf("limits[%d]", i)
		switch {
		case x.Key == "":
			return bad(f+".key", "must not be empty")
		case seen[x.Key]:
			return bad(f+".key", "%q is listed twice", x.Key)
		case x.Concurrent < 0:
			return bad(f+".concurrent", "must not be negative, got %d", x.Concurrent)
		case x.RequestsPerMinute < 0:
			return bad(f+".requests_per_minute", "must not be negative, got %d", x.RequestsPerMinute)
		case x.TokensPerMinute < 0:
			return bad(f+".tokens_per_minute", "must not be negative, got %d", x.TokensPerMinute)
		}
		for j, m := range x.Match {
			if m == "" {
				return bad(fmt.Sprintf("%s.match[%d]", f, j), "must not be empty")
			}
		}
		seen[x.Key] = true
	}
	return nil
}

func (l Limits) withDefaults() Limits {
	if l.Window == 0 {
		l.Window = DefaultWindow
	}
	if l.LeaseTTL == 0 {
		l.LeaseTTL = DefaultLeaseTTL
	}
	if l.MaxQueue == 0 {
		l.MaxQueue = DefaultMaxQueue
	}
	if l.MaxWait == 0 {
		l.MaxWait = DefaultMaxWait
	}
	if l.Cooldown == 0 {
		l.Cooldown = DefaultCooldown
	}
	return l
}

// For returns the limits that cover a call to provider's model, sorted by
// key: the order every replica takes them in, so that two calls never
// wait for each other's limits.
func (l Limits) For(provider, model string) []Limit {
	full := provider + ":" + model
	var out []Limit
	for _, x := range l.Limits {
		covers := x.Key == provider || x.Key == full
		if len(x.Match) > 0 {
			covers = slices.Contains(x.Match, provider) || slices.Contains(x.Match, full)
		}
		if covers && (x.Concurrent > 0 || x.RequestsPerMinute > 0 || x.TokensPerMinute > 0) {
			out = append(out, x)
		}
	}
	slices.SortFunc(out, func(a, b Limit) int { return strings.Compare(a.Key, b.Key) })
	return out
}

// limit returns the limit of key, if any.
func (l Limits) limit(key string) (Limit, bool) {
	for _, x := range l.Limits {
		if x.Key == key {
			return x, true
		}
	}
	return Limit{}, false
}
