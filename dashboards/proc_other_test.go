//go:build !linux

package dashboards

import "os/exec"

// dieWithParent does nothing outside Linux, which alone has
// PR_SET_PDEATHSIG: the tests' cleanups stop their processes.
func dieWithParent(*exec.Cmd) {}
