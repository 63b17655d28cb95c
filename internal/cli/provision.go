package cli

import (
	"context"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/llmworker/llmworker/pkg/provision"
)

const provisionAbout = `
Creates (or updates) the streams and KV buckets llmworker uses, with the
replicas given: on a three-node JetStream cluster run it once with
--replicas 3 before the services start, since a service creates missing
ones with one replica. Idempotent; refuses streams another prefix's
installation made (docs/protocol.md §2).`

func runProvision(ctx context.Context, env *Env, args []string) error {
	var (
		conn     connFlags
		replicas int
		o        provision.Options
	)
	fs := newFlags(env, "provision", "provision [flags]", provisionAbout)
	conn.register(fs, env)
	fs.IntVar(&replicas, "replicas", 1, "JetStream replicas of every stream and bucket (3 on a 3-node cluster)")
	fs.BoolVar(&o.Memory, "memory", false, "memory storage instead of file storage (throw-away installations)")
	fs.DurationVar(&o.EventsMaxAge, "events-max-age", 0, "how long LLMW_EVENTS keeps a turn's events (0 = 24h)")
	fs.DurationVar(&o.TurnsMaxAge, "turns-max-age", 0, "how long LLMW_TURNS keeps a request no turn replica took (0 = 24h, negative = no limit)")
	fs.DurationVar(&o.SessionsTTL, "sessions-ttl", 0, "how long LLMW_SESSIONS keeps a session's record after its last turn (0 = 720h, negative = for ever)")
	fs.DurationVar(&o.TranscriptsMaxAge, "transcripts-max-age", 0, "how long LLMW_TRANSCRIPTS keeps a transcript item after its append (0 = 720h, negative = for ever)")
	fs.DurationVar(&o.MediaMaxAge, "media-max-age", 0, "how long LLMW_MEDIA keeps an image or file after its upload (0 = 720h, negative = for ever)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: provision takes no arguments, got %q", ErrUsage, fs.Args())
	}
	if replicas < 1 || replicas > 5 {
		return fmt.Errorf("%w: --replicas %d: JetStream allows 1 to 5", ErrUsage, replicas)
	}
	o.Prefix, o.Replicas, o.ApplyLimits = conn.prefix, replicas, true
	cl, err := conn.connect("provision")
	if err != nil {
		return err
	}
	defer cl.close()
	pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := provision.Provision(pctx, cl.js, o); err != nil {
		return err
	}
	tw := tabwriter.NewWriter(env.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "STREAM\tREPLICAS\tSUBJECTS")
	for _, c := range provision.StreamConfigs(o) {
		st, err := cl.js.Stream(pctx, c.Name)
		if err != nil {
			return err
		}
		info := st.CachedInfo().Config
		fmt.Fprintf(tw, "%s\t%d\t%v\n", info.Name, info.Replicas, info.Subjects)
	}
	for _, c := range provision.BucketConfigs(o) {
		kv, err := cl.js.KeyValue(pctx, c.Bucket)
		if err != nil {
			return err
		}
		s, err := kv.Status(pctx)
		if err != nil {
			return err
		}
		replicas := 0
		if bs, ok := s.(*jetstream.KeyValueBucketStatus); ok {
			replicas = bs.StreamInfo().Config.Replicas
		}
		fmt.Fprintf(tw, "%s (KV)\t%d\t\n", c.Bucket, replicas)
	}
	for _, c := range provision.ObjectStoreConfigs(o) {
		obs, err := cl.js.ObjectStore(pctx, c.Bucket)
		if err != nil {
			return err
		}
		s, err := obs.Status(pctx)
		if err != nil {
			return err
		}
		fmt.Fprintf(tw, "%s (objects, max age %v)\t%d\t\n", c.Bucket, s.TTL(), s.Replicas())
	}
	return tw.Flush()
}
