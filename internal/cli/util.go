package cli

import (
	"encoding/json"
	"flag"
	"sort"

	"github.com/nats-io/nats.go"

	"github.com/llmworker/llmworker/pkg/events"
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

func natsMsg(subject string, e *events.Envelope) *nats.Msg {
	return &nats.Msg{Subject: subject, Header: nats.Header(e.BinaryHeader()), Data: e.Data}
}
