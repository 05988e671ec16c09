package weigher

import (
	"runtime"
	"syscall"
	"time"
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

func threadCPU() (time.Duration, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(1 /* RUSAGE_THREAD */, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
