//go:build !unix

package turn_test

import "time"

// cpuTime is not measured here: cpu-ns/delta reads 0.
func cpuTime() time.Duration { return 0 }
