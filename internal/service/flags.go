package service

import (
	"errors"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// ErrUsage is matched by the errors of a command line or environment that
// Main cannot run with; Main exits 2 for them.
var ErrUsage = errors.New("usage")

// Flags registers flags whose defaults come from the environment. In a
// single-service command each flag is registered once; for several
// services in one process (NewMultiFlags) every flag also exists as
// --<service>-<name> for that service alone, and the plain --<name> sets
// the flag of every service that has one of that name. Entries lists what
// the services registered, for a --help grouped by service.
type Flags struct {
	fs      *flag.FlagSet
	getenv  func(string) string
	svc     string
	multi   bool
	shared  map[string]*fanout
	errs    *[]error
	entries *[]Entry
}

// Entry is a flag registered with Flags.
type Entry struct {
	// Service and Name: the flag is --<Name>, and in a multi-service flag
	// set also --<Service>-<Name> when Service is set (Flags.For).
	Service, Name string
	// Env is the variable its default comes from ("" = none).
	Env string
	// Usage is the flag's description, naming Env.
	Usage string
	// Type names the value in help ("string", "int", "duration"; "" for
	// a switch).
	Type string
}

// NewFlags registers into fs, reading defaults with getenv.
func NewFlags(fs *flag.FlagSet, getenv func(string) string) *Flags {
	return &Flags{fs: fs, getenv: getenv, shared: map[string]*fanout{}, errs: new([]error), entries: new([]Entry)}
}

// Entries returns the flags registered, in order.
func (f *Flags) Entries() []Entry { return append([]Entry(nil), *f.entries...) }

// NewMultiFlags is NewFlags for several services in one flag set.
func NewMultiFlags(fs *flag.FlagSet, getenv func(string) string) *Flags {
	f := NewFlags(fs, getenv)
	f.multi = true
	return f
}

// For returns the Flags a service registers its own flags with.
func (f *Flags) For(service string) *Flags {
	c := *f
	c.svc = service
	return &c
}

// Err reports environment variables that do not parse as their flag's
// type (matching ErrUsage), so that a typo in a deployment is refused
// instead of silently running with the default.
func (f *Flags) Err() error { return errors.Join(*f.errs...) }

// String registers a string flag defaulting to $env, then def.
func (f *Flags) String(p *string, name, env, def, usage string) {
	v := def
	if s := f.lookup(env); s != "" {
		v = s
	}
	f.define(name, env, usage, &value[string]{p: p, parse: func(s string) (string, error) { return s, nil }, str: func(s string) string { return s }, typ: "string"}, v)
}

// Int registers an int flag defaulting to $env, then def.
func (f *Flags) Int(p *int, name, env string, def int, usage string) {
	f.define(name, env, usage, &value[int]{p: p, parse: strconv.Atoi, str: strconv.Itoa, typ: "int"}, parsedFrom(f, env, def, strconv.Atoi))
}

// Duration registers a duration flag defaulting to $env, then def.
func (f *Flags) Duration(p *time.Duration, name, env string, def time.Duration, usage string) {
	f.define(name, env, usage, &value[time.Duration]{p: p, parse: time.ParseDuration, str: time.Duration.String, typ: "duration"}, parsedFrom(f, env, def, time.ParseDuration))
}

// Strings registers a repeatable flag: every use adds a value. Without
// any, the values are the lines of $env.
func (f *Flags) Strings(p *[]string, name, env, usage string) {
	var def []string
	for l := range strings.SplitSeq(f.lookup(env), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			def = append(def, l)
		}
	}
	f.define(name, env, usage+" (repeatable; the variable: one per line)", &list{p: p}, def)
}

// list is a repeatable flag.Value: the first Set replaces the default.
type list struct {
	p   *[]string
	set bool
}

func (l *list) String() string {
	if l == nil || l.p == nil {
		return ""
	}
	return strings.Join(*l.p, ", ")
}

func (l *list) Set(s string) error {
	if !l.set {
		*l.p, l.set = nil, true
	}
	*l.p = append(*l.p, s)
	return nil
}

func (l *list) setDefault(d any) { *l.p = d.([]string) }
func (l *list) typeName() string { return "string" }

// Bool registers a bool flag defaulting to $env (true, 1, ...), then def.
func (f *Flags) Bool(p *bool, name, env string, def bool, usage string) {
	f.define(name, env, usage, &value[bool]{p: p, parse: strconv.ParseBool, str: strconv.FormatBool, isBool: true}, parsedFrom(f, env, def, strconv.ParseBool))
}

func (f *Flags) lookup(env string) string {
	if env == "" {
		return ""
	}
	return f.getenv(env)
}

// parsedFrom is the value of $env as a T, def when it is unset; a value
// that does not parse is recorded for Err.
func parsedFrom[T any](f *Flags, env string, def T, parse func(string) (T, error)) T {
	s := f.lookup(env)
	if s == "" {
		return def
	}
	v, err := parse(s)
	if err != nil {
		*f.errs = append(*f.errs, fmt.Errorf("%w: $%s=%q: %v", ErrUsage, env, s, err))
		return def
	}
	return v
}

// setter is a typed flag value that can set its default.
type setter interface {
	flag.Value
	setDefault(v any)
	typeName() string
}

func (f *Flags) define(name, env, usage string, v setter, def any) {
	v.setDefault(def)
	if env != "" {
		usage += " ($" + env + ")"
	}
	*f.entries = append(*f.entries, Entry{Service: f.svc, Name: name, Env: env, Usage: usage, Type: v.typeName()})
	if !f.multi || f.svc == "" {
		f.fs.Var(v, name, usage)
		return
	}
	// Several services: --<service>-<name> for this one, --<name> for all.
	f.fs.Var(v, f.svc+"-"+name, usage)
	if fo, ok := f.shared[name]; ok {
		fo.vals = append(fo.vals, v)
		return
	}
	fo := &fanout{vals: []setter{v}}
	f.shared[name] = fo
	f.fs.Var(fo, name, usage)
}

// fanout sets the same flag of several services.
type fanout struct{ vals []setter }

func (o *fanout) String() string {
	if o == nil || len(o.vals) == 0 {
		return ""
	}
	return o.vals[0].String()
}

func (o *fanout) Set(s string) error {
	for _, v := range o.vals {
		if err := v.Set(s); err != nil {
			return err
		}
	}
	return nil
}

func (o *fanout) IsBoolFlag() bool {
	if len(o.vals) == 0 {
		return false
	}
	b, ok := o.vals[0].(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

// value is a flag.Value writing through p.
type value[T any] struct {
	p      *T
	parse  func(string) (T, error)
	str    func(T) string
	isBool bool
	typ    string
}

func (v *value[T]) String() string {
	if v == nil || v.p == nil {
		return ""
	}
	return v.str(*v.p)
}

func (v *value[T]) Set(s string) error {
	x, err := v.parse(s)
	if err != nil {
		return err
	}
	*v.p = x
	return nil
}

func (v *value[T]) IsBoolFlag() bool { return v.isBool }
func (v *value[T]) setDefault(d any) { *v.p = d.(T) }
func (v *value[T]) typeName() string { return v.typ }

// SplitList splits a comma-separated flag value, dropping empty items.
func SplitList(s string) []string {
	var out []string
	for p := range strings.SplitSeq(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
