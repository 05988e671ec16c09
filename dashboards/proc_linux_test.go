package dashboards

import (
	"os/exec"
	"syscall"
)

// dieWithParent has the kernel kill a process the tests start (Prometheus)
// if the test binary dies without running its cleanups (a panic, a go test
// timeout).
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
