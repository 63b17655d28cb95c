package main

import "testing"

func TestStealPct(t *testing.T) {
	// Two readings of a 2-vCPU VM's /proc/stat, 10 s apart: of the 2,000
	// ticks that passed (100 Hz), 200 were stolen.
	a := parseCPULine("cpu  161251 0 33415 118320 984 0 2267 7144 0 0")
	b := parseCPULine("cpu  162251 0 33715 118820 984 0 2267 7344 0 0")
	if !a.ok || !b.ok {
		t.Fatalf("lines not read: %+v %+v", a, b)
	}
	p := stealPct(a, b)
	if p == nil || *p != 10 {
		t.Fatalf("steal = %v, want 10%%", deref(p))
	}
	for _, bad := range []string{"", "intr 1 2 3", "cpu 1 2 3", "cpu0 1 2 3 4 5 6 7 8", "cpu 1 2 x 4 5 6 7 8"} {
		if c := parseCPULine(bad); c.ok {
			t.Errorf("%q read as %+v", bad, c)
		}
	}
	if stealPct(a, a) != nil || stealPct(cpuTimes{}, b) != nil {
		t.Error("a steal from no time or an unread line")
	}
}

func deref(p *float64) any {
	if p == nil {
		return nil
	}
	return *p
}
