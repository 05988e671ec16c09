//go:build !linux

package weigher

import "time"

// cpuTime is the wall time of f where the thread's CPU time is not
// available.
func cpuTime(f func()) time.Duration {
	start := time.Now()
	f()
	return time.Since(start)
}

// threadCPU is not available here.
func threadCPU() (time.Duration, bool) { return 0, false }
