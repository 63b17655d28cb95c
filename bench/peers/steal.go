package main

import (
	"bufio"
	"os"
	"strconv"
	"strings"
)

// cpuTimes is the machine's "cpu" line of /proc/stat: the time all its
// CPUs spent in each state since boot, in clock ticks.
type cpuTimes struct {
	total, steal uint64
	ok           bool
}

// readCPUTimes reads /proc/stat (Linux; elsewhere ok is false).
func readCPUTimes() cpuTimes {
	f, err := os.Open("/proc/stat")
	if err != nil {
		return cpuTimes{}
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	if !sc.Scan() {
		return cpuTimes{}
	}
	return parseCPULine(sc.Text())
}

// parseCPULine reads the aggregate line of /proc/stat: "cpu" then user
// nice system idle iowait irq softirq steal [guest guest_nice]. Guest
// time is counted in user already, so the total is the first eight.
func parseCPULine(line string) cpuTimes {
	fields := strings.Fields(line)
	if len(fields) < 9 || fields[0] != "cpu" {
		return cpuTimes{}
	}
	var t cpuTimes
	for i, s := range fields[1:9] {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return cpuTimes{}
		}
		t.total += v
		if i == 7 {
			t.steal = v
		}
	}
	t.ok = true
	return t
}

// stealPct is the share of the machine's CPU time between a and b that
// the hypervisor gave to other guests (steal), in percent; nil when it
// cannot be read. A VM whose vCPUs are taken away that often stalls
// whatever runs on them at random, for up to milliseconds: a chain of
// messages between goroutines, as a distributed step is, feels every
// stall on its path (docs/benchmarks.md, Peers).
func stealPct(a, b cpuTimes) *float64 {
	if !a.ok || !b.ok || b.total <= a.total {
		return nil
	}
	p := 100 * float64(b.steal-a.steal) / float64(b.total-a.total)
	return &p
}
