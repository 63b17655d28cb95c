package cli

import (
	"encoding/json"
	"flag"
	"sort"
)

func sorted(s []string) []string {
	sort.Strings(s)
	return s
}

func jsonValid(s string) bool { return json.Valid([]byte(s)) }

// flagSet adapts a *flag.FlagSet to turnArg, marking flag errors as usage
// errors the flag package already printed.
type flagSet struct{ fs *flag.FlagSet }

func (f flagSet) Parse(args []string) error { return parse(f.fs, args) }
func (f flagSet) Args() []string            { return f.fs.Args() }
