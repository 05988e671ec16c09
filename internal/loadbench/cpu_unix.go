//go:build unix

package loadbench

import "syscall"

// selfCPU is this process's CPU time so far, user plus system, in
// microseconds, from getrusage(RUSAGE_SELF): every thread, those that
// exited included.
func selfCPU() (int64, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, err
	}
	return ru.Utime.Nano()/1000 + ru.Stime.Nano()/1000, nil
}
