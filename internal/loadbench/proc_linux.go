package loadbench

import (
	"fmt"
	"math"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
)

// dieWithParent has the kernel kill the process when the benchmark dies
// without stopping it (a panic, a signal).
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

// clockTicks is USER_HZ, the unit of /proc/PID/stat's times: 100 on every
// Linux architecture Go supports (sysconf(_SC_CLK_TCK); see proc(5)).
const clockTicks = 100

// procCPU is process pid's CPU time so far (utime + stime of every thread,
// proc(5) fields 14 and 15) in microseconds, at USER_HZ resolution (10 ms).
// Errors: those of procTimes.
func procCPU(pid int) (int64, error) {
	user, sys, err := procTimes(pid)
	return user + sys, err
}

// procTimes is process pid's user and system time so far (utime and stime
// of every thread, proc(5) fields 14 and 15), each in microseconds at
// USER_HZ resolution (10 ms). Errors: no such process, or a line that does
// not parse.
func procTimes(pid int) (user, sys int64, err error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, err
	}
	user, sys, ok := parseStatTimes(string(b))
	if !ok {
		return 0, 0, fmt.Errorf("loadbench: /proc/%d/stat: %q", pid, b)
	}
	return user, sys, nil
}

// parseStatTimes reads utime and stime (fields 14 and 15, in USER_HZ
// ticks) from s, a /proc/PID/stat line, and returns them in microseconds;
// ok is false when s has no such fields or they are not non-negative
// integers. The command name (field 2) is in parentheses and may hold
// spaces and parentheses itself: fields are counted after the last ')'.
func parseStatTimes(s string) (user, sys int64, ok bool) {
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, 0, false
	}
	f := strings.Fields(s[i+1:]) // f[0] is field 3, the state
	if len(f) < 13 {
		return 0, 0, false
	}
	ut, err1 := strconv.ParseUint(f[11], 10, 63)
	st, err2 := strconv.ParseUint(f[12], 10, 63)
	if err1 != nil || err2 != nil || ut > math.MaxInt64/1_000_000 || st > math.MaxInt64/1_000_000 {
		return 0, 0, false
	}
	return int64(ut) * 1e6 / clockTicks, int64(st) * 1e6 / clockTicks, true
}

// cpuModel is the first "model name" of /proc/cpuinfo, or "".
func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return ""
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// loadAverage is the 1-minute load average from /proc/loadavg, or "".
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return ""
	}
	return f[0]
}
