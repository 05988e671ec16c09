//go:build !linux

package loadbench

import (
	"errors"
	"os/exec"
)

// dieWithParent does nothing here: only Linux offers a parent-death signal.
func dieWithParent(*exec.Cmd) {}

// procCPU is unavailable without /proc: Redis's CPU is not reported.
func procCPU(int) (int64, error) { return 0, errors.New("loadbench: no /proc on this system") }

// procTimes is unavailable without /proc: the proxies' system time is not
// reported.
func procTimes(int) (user, sys int64, err error) {
	return 0, 0, errors.New("loadbench: no /proc on this system")
}

// cpuModel is unknown here.
func cpuModel() string { return "" }

// loadAverage is unknown here.
func loadAverage() string { return "" }
