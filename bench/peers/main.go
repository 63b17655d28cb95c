// Command peers measures llmworker against the runtimes a team would
// pick instead, on the same agent turn in the same run: Temporal (regular
// and local activities, embedded test server) for the durable,
// distributed side, Eino's ReAct agent for the in-process side.
//
//	peers all [-rounds 5] [-crash-rounds 3]   # what scripts/bench-peers.sh runs
//	peers run -side <side> -par <n> ...       # one measurement, JSON on stdout
//
// `all` runs every side as a child process of its own, interleaved (A B
// C, then C B A, …, -rounds times) so that machine drift cancels, and
// prints one line per comparison with the medians over the repetitions.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"os/exec"
	"runtime"
	"runtime/pprof"
	"runtime/trace"
	"slices"
	"strconv"
	"strings"
	"time"
)

// A side is one runtime in one configuration.
type side struct {
	name         string
	warmup, runs int
	run          func(par int, o runOpts) (*result, error)
}

var sides = map[string]side{
	"llmworker-durable": {"llmworker-durable", 5, 40, func(p int, o runOpts) (*result, error) {
		return llmwDurable(llmwServices{par: p, storage: "memory"}, o)
	}},
	"llmworker-durable-file": {"llmworker-durable-file", 3, 20, func(p int, o runOpts) (*result, error) {
		return llmwDurable(llmwServices{par: p, storage: "file"}, o)
	}},
	// The tool inside the turn service, as a local activity runs inside
	// the workflow's worker.
	"llmworker-durable-local": {"llmworker-durable-local", 5, 40, func(p int, o runOpts) (*result, error) {
		return llmwDurable(llmwServices{par: p, storage: "memory", localTools: true}, o)
	}},
	// The model inside the turn service (no ingest), as Temporal's local
	// activities run the model's activity inside the workflow's worker;
	// the tools stay on toolexec.
	"llmworker-durable-model-local": {"llmworker-durable-model-local", 5, 40, func(p int, o runOpts) (*result, error) {
		return llmwDurable(llmwServices{par: p, storage: "memory", localModel: true}, o)
	}},
	"temporal-regular": {"temporal-regular", 0, 1, func(p int, o runOpts) (*result, error) { return temporalDurable(false, p, o) }},
	"temporal-local":   {"temporal-local", 5, 40, func(p int, o runOpts) (*result, error) { return temporalDurable(true, p, o) }},
	"llmworker-inproc": {"llmworker-inproc", 200, 2000, llmwInProcess},
	"eino":             {"eino", 200, 2000, einoInProcess},
	"llmworker-crash":  {"llmworker-crash", 0, 0, func(int, runOpts) (*result, error) { return llmwCrash() }},
	"temporal-crash":   {"temporal-crash", 0, 0, func(int, runOpts) (*result, error) { return temporalCrash() }},
}

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	var err error
	switch os.Args[1] {
	case "all":
		err = all(os.Args[2:])
	case "run":
		err = runSide(os.Args[2:])
	case "crash-child":
		fs := flag.NewFlagSet("crash-child", flag.ExitOnError)
		system := fs.String("system", "", "llmworker or temporal")
		addr := fs.String("addr", "", "NATS URL or Temporal host:port")
		ns := fs.String("namespace", "", "Temporal namespace")
		withGate := fs.Bool("gate", false, "block the crash call (the first child)")
		_ = fs.Parse(os.Args[2:])
		err = crashChild(*system, *addr, *ns, *withGate)
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "peers:", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: peers all [-rounds n] [-crash-rounds n] | peers run -side name [-par n] [-warmup n] [-turns n]")
	os.Exit(2)
}

func runSide(args []string) error {
	fs := flag.NewFlagSet("run", flag.ExitOnError)
	name := fs.String("side", "", "side to measure")
	par := fs.Int("par", 1, "tool calls per step")
	warmup := fs.Int("warmup", -1, "turns before measuring (-1 = the side's default)")
	turns := fs.Int("turns", -1, "turns measured (-1 = the side's default)")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the measured turns to this file")
	memProfile := fs.String("memprofile", "", "write an allocation profile (every 512 bytes) to this file")
	traceFile := fs.String("trace", "", "write an execution trace (runtime/trace) of the run to this file")
	spans := fs.Bool("spans", false, "record llmworker's OpenTelemetry spans and print where its steps wait (stderr)")
	_ = fs.Parse(args)
	if *traceFile != "" {
		f, err := os.Create(*traceFile)
		if err != nil {
			return err
		}
		if err := trace.Start(f); err != nil {
			return err
		}
		defer func() { trace.Stop(); _ = f.Close() }()
	}
	if *memProfile != "" {
		runtime.MemProfileRate = 512
		defer func() {
			if f, err := os.Create(*memProfile); err == nil {
				_ = pprof.Lookup("allocs").WriteTo(f, 0)
				_ = f.Close()
			}
		}()
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer func() { pprof.StopCPUProfile(); _ = f.Close() }()
	}
	s, ok := sides[*name]
	if !ok {
		return fmt.Errorf("unknown side %q", *name)
	}
	o := runOpts{Warmup: s.warmup, Turns: s.runs}
	if *warmup >= 0 {
		o.Warmup = *warmup
	}
	if *turns > 0 {
		o.Turns = *turns
	}
	if *spans {
		report := recordSpans()
		defer report(os.Stderr)
	}
	r, err := s.run(*par, o)
	if err != nil {
		return err
	}
	return json.NewEncoder(os.Stdout).Encode(r)
}

// runChild runs one measurement in a process of its own.
func runChild(name string, par int) (*result, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "run", "-side", name, "-par", strconv.Itoa(par))
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("%s par %d: %v: %s", name, par, err, errb.String())
	}
	var r result
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		return nil, fmt.Errorf("%s par %d: %v: %q", name, par, err, out.String())
	}
	fmt.Fprintf(os.Stderr, "  %-24s par=%d %s", name, par, out.String())
	return &r, nil
}

// group is a set of sides measured interleaved; the first is llmworker's.
type group struct {
	par   int
	sides []string
	// compare lists (llmworker side, peer side, peer name in the output).
	compare [][3]string
	crash   bool
}

func all(args []string) error {
	fs := flag.NewFlagSet("all", flag.ExitOnError)
	rounds := fs.Int("rounds", 5, "rounds of the step measurements")
	crashRounds := fs.Int("crash-rounds", 3, "rounds of the crash measurement")
	only := fs.String("only", "", "comma-separated groups to run (durable,inproc,crash; empty = all)")
	_ = fs.Parse(args)
	durable := func(par int) group {
		g := group{par: par, sides: []string{"llmworker-durable", "temporal-local", "llmworker-durable-file", "llmworker-durable-local", "llmworker-durable-model-local"},
			compare: [][3]string{
				{"llmworker-durable", "temporal-local", "temporal-local"},
				{"llmworker-durable-file", "temporal-local", "temporal-local(llmworker-fsync)"},
				{"llmworker-durable-local", "temporal-local", "temporal-local(llmworker-local-tools)"},
				{"llmworker-durable-model-local", "temporal-local", "temporal-local(llmworker-local-model)"},
			}}
		if par == 1 {
			// With 4 parallel regular activities per step a turn did not
			// end within runAgent's 2 minutes on the test server
			// (docs/benchmarks.md): the comparison runs with one.
			g.sides = append(g.sides, "temporal-regular")
			g.compare = append(g.compare,
				[3]string{"llmworker-durable", "temporal-regular", "temporal-regular"},
				[3]string{"llmworker-durable-file", "temporal-regular", "temporal-regular(llmworker-fsync)"})
		}
		return g
	}
	inproc := func(par int) group {
		return group{par: par, sides: []string{"llmworker-inproc", "eino"}, compare: [][3]string{{"llmworker-inproc", "eino", "eino"}}}
	}
	groups := map[string][]group{
		"durable": {durable(1), durable(4)},
		"inproc":  {inproc(1), inproc(4)},
		"crash":   {{par: 1, sides: []string{"llmworker-crash", "temporal-crash"}, compare: [][3]string{{"llmworker-crash", "temporal-crash", "temporal-regular"}}, crash: true}},
	}
	order := []string{"inproc", "durable", "crash"}
	if *only != "" {
		order = strings.Split(*only, ",")
	}
	for _, gname := range order {
		for _, g := range groups[gname] {
			n := *rounds
			if g.crash {
				n = *crashRounds
			}
			got := map[string][]*result{}
			for r := range n {
				fmt.Fprintf(os.Stderr, "%s par=%d round %d/%d\n", gname, g.par, r+1, n)
				names := slices.Clone(g.sides)
				if r%2 == 1 {
					slices.Reverse(names)
				}
				for _, name := range names {
					res, err := runChild(name, g.par)
					if err != nil {
						return err
					}
					got[name] = append(got[name], res)
				}
			}
			for _, c := range g.compare {
				printComparison(c[2], g, got[c[0]], got[c[1]])
			}
		}
	}
	return nil
}

func printComparison(peer string, g group, ours, theirs []*result) {
	type metric struct {
		name string
		get  func(*result) float64
	}
	var metrics []metric
	if g.crash {
		metrics = []metric{{"crash_to_done_ms", func(r *result) float64 { return r.CrashToDoneMs }}}
	} else {
		metrics = []metric{
			{"step_ms_p50", func(r *result) float64 { return r.StepMedianMs }},
			{"step_ms_p99", func(r *result) float64 { return r.StepP99Ms }},
			{"allocs_per_step", func(r *result) float64 { return r.AllocsPerStep }},
			{"bytes_per_step", func(r *result) float64 { return r.BytesPerStep }},
		}
		if hasSteal(ours) && hasSteal(theirs) {
			// Not a comparison of the runtimes: how much of the machine the
			// hypervisor took while each side ran (a quiet machine: 0).
			metrics = append(metrics, metric{"steal_pct", func(r *result) float64 { return *r.StealPct }})
		}
	}
	suffix := ""
	if !g.crash {
		suffix = "/" + strconv.Itoa(g.par) + "tool"
		if g.par > 1 {
			suffix += "s"
		}
	}
	for _, m := range metrics {
		a, b := medianOf(ours, m.get), medianOf(theirs, m.get)
		ratio := math.NaN()
		if b != 0 {
			ratio = a / b
		}
		fmt.Printf("peer=%s metric=%s%s llmworker=%s peer_value=%s ratio=%.4g\n", peer, m.name, suffix, num(a), num(b), ratio)
	}
}

// hasSteal says whether every result has the machine's steal time.
func hasSteal(rs []*result) bool {
	for _, r := range rs {
		if r.StealPct == nil {
			return false
		}
	}
	return len(rs) > 0
}

func medianOf(rs []*result, get func(*result) float64) float64 {
	v := make([]float64, len(rs))
	for i, r := range rs {
		v[i] = get(r)
	}
	return median(v)
}

func num(v float64) string {
	switch {
	case v >= 1000:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case v >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	default:
		return strconv.FormatFloat(v, 'f', 3, 64)
	}
}
