package app

import (
	"time"

	"golang.org/x/sys/unix"
)

// processCPU is this process's CPU time so far, every thread's, from
// clock_gettime(CLOCK_PROCESS_CPUTIME_ID) (clock_gettime(2): the
// scheduler's nanosecond account). Unlike wall time it does not grow while
// the process waits for a CPU on a loaded machine. ok is false when the
// clock cannot be read.
func processCPU() (cpu time.Duration, ok bool) {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_PROCESS_CPUTIME_ID, &ts); err != nil {
		return 0, false
	}
	return time.Duration(ts.Nano()), true
}
