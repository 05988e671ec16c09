package app

import (
	"fmt"
	"strings"
	"time"
)

// Timer slack (Linux): how late the kernel may wake a thread past a sleep's
// end, so that wake-ups coalesce. A process starts with its parent's,
// usually 50 µs. The Go runtime's monitor thread (sysmon) sleeps 20 µs at a
// time while the process is busy, and each of its wake-ups is a context
// switch in and out; the monitor is made before main runs, so only a slack
// inherited at start reaches it. At concurrency 32 on this project's 2-core
// guest the monitor took 8–11% of the proxy's CPU a request at the default
// slack (perf, README "Performance"); with 1 ms, a request costs 15–30% less
// CPU. What a larger slack delays: every timer of the process (deadlines,
// on_limit waits, store and lease timers) may fire up to the slack late, on
// top of the millisecond the Go runtime's poller already rounds to; the
// monitor hands the processor of a goroutine stuck in a blocking system call
// to another up to the slack later (llmguard's network I/O never blocks a
// thread), and preempts a goroutine running 10 ms without yielding up to
// the slack later.

// DefaultTimerSlack is the timer slack llmguard serve runs with unless
// TimerSlackEnv says otherwise: 1 ms.
const DefaultTimerSlack = time.Millisecond

// TimerSlackEnv names the environment variable that sets the timer slack
// llmguard serve runs with: a Go duration from 1 ns to 1 s ("1ms",
// "200us"), or "off" (or "0") to keep the slack the process was started
// with. Unset or empty: DefaultTimerSlack.
const TimerSlackEnv = "LLMGUARD_TIMER_SLACK"

// maxTimerSlack bounds TimerSlackEnv: a second of lateness on every timer
// is past any use.
const maxTimerSlack = time.Second

// TimerSlack returns the timer slack TimerSlackEnv asks for, read with
// lookupEnv (os.LookupEnv): DefaultTimerSlack when unset or empty, 0 for
// "off" or "0" (keep the inherited slack). Errors: a value that is not a
// duration, or one out of (0, 1 s].
func TimerSlack(lookupEnv func(string) (string, bool)) (time.Duration, error) {
	v, _ := lookupEnv(TimerSlackEnv)
	v = strings.TrimSpace(v)
	switch v {
	case "":
		return DefaultTimerSlack, nil
	case "off", "0":
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, fmt.Errorf("app: %s=%q: not a duration (e.g. 1ms, 200us) nor off", TimerSlackEnv, v)
	}
	if d <= 0 || d > maxTimerSlack {
		return 0, fmt.Errorf("app: %s=%q: out of range (1ns to 1s, or off)", TimerSlackEnv, v)
	}
	return d, nil
}
