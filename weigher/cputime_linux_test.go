package weigher

import (
	"runtime"
	"time"

	"golang.org/x/sys/unix"
)

// cpuTime runs f on a locked OS thread and returns the CPU time the thread
// spent in it (RUSAGE_THREAD): unlike wall time, it does not count the
// time the thread waited for a CPU on a loaded machine.
func cpuTime(f func()) time.Duration {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	before, ok1 := threadCPU()
	f()
	after, ok2 := threadCPU()
	if !ok1 || !ok2 {
		start := time.Now()
		f()
		return time.Since(start)
	}
	return after - before
}

// threadCPU is the calling thread's CPU time so far, from
// clock_gettime(CLOCK_THREAD_CPUTIME_ID) (clock_gettime(2)): the
// scheduler's own nanosecond account of the thread. getrusage's
// RUSAGE_THREAD, used before, splits that time into user and system by
// sampling at the timer tick (4 ms at HZ=250), so a weighing of a few
// milliseconds read as 0, 1 or 2 ticks and ratios between two of them
// swung 4× on a loaded machine (TestBodyShapesLinear's prose baseline
// takes about 3 ms per MiB).
func threadCPU() (time.Duration, bool) {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		return 0, false
	}
	return time.Duration(ts.Nano()), true
}
