//go:build unix

package app

import "syscall"

// fileLimit is the process's file-descriptor limit (RLIMIT_NOFILE's soft
// value, which the Go runtime raises to the hard value at start-up on
// Linux), or 0 when it cannot be read or is unlimited (RLIM_INFINITY: all
// ones on Linux and macOS, the largest int64 on FreeBSD; any limit of 2^62
// or more is read as unlimited).
func fileLimit() uint64 {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		return 0
	}
	if cur := uint64(l.Cur); cur < 1<<62 {
		return cur
	}
	return 0
}
