package app

import (
	"fmt"
	"os"
	"runtime"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// EnsureTimerSlack makes this process run with timer slack d (see
// DefaultTimerSlack) in every thread: when the calling thread's slack is
// below d, it sets it to d (prctl PR_SET_TIMERSLACK, no privilege needed)
// and executes the same program again (its own file, see selfPath, with
// the same arguments and environment, the same process id and open
// descriptors), so that
// every thread the new image's runtime makes, its monitor first, inherits
// d. It does nothing when d is 0 or the slack is already at least d (as
// after that execution, or when the parent set it, e.g. systemd's
// TimerSlackNSec=). Call it first in main, before anything that must not
// run twice. It returns the slack the process runs with, as the calling
// thread reads it: d once executed again, the inherited slack when it is
// kept (0 when it cannot be read), so that the start-up log names the
// slack in force rather than the one asked for. Errors: the slack could
// not be set (a realtime thread's is always 0), or the execution failed;
// the process then goes on as it is, with its old slack restored and
// returned.
func EnsureTimerSlack(d time.Duration) (time.Duration, error) {
	// The thread that sets the slack must be the one that executes.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	old, err := unix.PrctlRetInt(unix.PR_GET_TIMERSLACK, 0, 0, 0, 0)
	if d <= 0 {
		if err != nil {
			return 0, nil
		}
		return time.Duration(old), nil
	}
	if err != nil {
		return 0, fmt.Errorf("app: timer slack: %w", err)
	}
	if time.Duration(old) >= d {
		return time.Duration(old), nil
	}
	if err := unix.Prctl(unix.PR_SET_TIMERSLACK, uintptr(d.Nanoseconds()), 0, 0, 0); err != nil {
		return time.Duration(old), fmt.Errorf("app: timer slack: set %v: %w", d, err)
	}
	if got, err := unix.PrctlRetInt(unix.PR_GET_TIMERSLACK, 0, 0, 0, 0); err != nil || time.Duration(got) < d {
		// Not taken (a realtime thread): executing again would loop.
		unix.Prctl(unix.PR_SET_TIMERSLACK, uintptr(old), 0, 0, 0)
		return time.Duration(old), fmt.Errorf("app: timer slack: set %v: the thread keeps %v", d, time.Duration(got))
	}
	err = syscall.Exec(selfPath(), os.Args, os.Environ())
	unix.Prctl(unix.PR_SET_TIMERSLACK, uintptr(old), 0, 0, 0)
	return time.Duration(old), fmt.Errorf("app: timer slack: execute again: %w", err)
}

// selfPath is the file to execute this program again from: its own path
// (os.Executable) when that still names the running file, so that the
// kernel names the process after it ("llmguard" in /proc/<pid>/comm, which
// ps, top, pgrep and killall read), else /proc/self/exe (the binary
// replaced or removed since it started). Executed as /proc/self/exe, every
// llmguard process was named "exe" (trial9: pgrep -x llmguard found none;
// the name is the kernel's comm, the executed file's base name cut to 15
// bytes).
func selfPath() string {
	const self = "/proc/self/exe"
	path, err := os.Executable()
	if err != nil {
		return self
	}
	running, err := os.Stat(self)
	if err != nil {
		return self
	}
	if named, err := os.Stat(path); err != nil || !os.SameFile(running, named) {
		return self
	}
	return path
}
