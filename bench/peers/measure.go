package main

import (
	"runtime"
	"slices"
	"time"
)

// runOpts says how many turns one measurement runs.
type runOpts struct {
	Warmup, Turns int
}

// result is one measurement of one side, printed as JSON by a child
// process: per-step time (a turn's time / its steps) at the median and
// p99 over the turns, and the process's allocations per step (servers
// in the process included: NATS for llmworker, Temporal's for Temporal).
type result struct {
	StepMedianMs  float64 `json:"step_median_ms"`
	StepP99Ms     float64 `json:"step_p99_ms"`
	AllocsPerStep float64 `json:"allocs_per_step"`
	BytesPerStep  float64 `json:"bytes_per_step"`
	// CrashToDoneMs is the crash measurement's result.
	CrashToDoneMs float64 `json:"crash_to_done_ms,omitempty"`
	// StealPct is the share of the machine's CPU time that its hypervisor
	// gave to other guests while the turns were measured (Linux only): a
	// quiet machine has none, and the step times of a run with much of it
	// are not comparable with those of one without.
	StealPct *float64 `json:"steal_pct,omitempty"`
}

func measure(o runOpts, turn func() error) (*result, error) {
	for range o.Warmup {
		if err := turn(); err != nil {
			return nil, err
		}
	}
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	cpuBefore := readCPUTimes()
	per := make([]time.Duration, 0, o.Turns)
	for range o.Turns {
		start := time.Now()
		if err := turn(); err != nil {
			return nil, err
		}
		per = append(per, time.Since(start)/steps)
	}
	cpuAfter := readCPUTimes()
	runtime.ReadMemStats(&after)
	n := float64(o.Turns * steps)
	return &result{
		StepMedianMs:  ms(percentile(per, 0.5)),
		StepP99Ms:     ms(percentile(per, 0.99)),
		AllocsPerStep: float64(after.Mallocs-before.Mallocs) / n,
		BytesPerStep:  float64(after.TotalAlloc-before.TotalAlloc) / n,
		StealPct:      stealPct(cpuBefore, cpuAfter),
	}, nil
}

func percentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[int(float64(len(s)-1)*p+0.5)]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
