//go:build !linux

package redistest

import "os/exec"

// dieWithParent does nothing here: only Linux offers a parent-death signal.
func dieWithParent(*exec.Cmd) {}
