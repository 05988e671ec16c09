//go:build !linux

package app

import "time"

// EnsureTimerSlack does nothing on this platform (timer slack is a Linux
// setting) and returns 0 (no slack known) and nil.
func EnsureTimerSlack(time.Duration) (time.Duration, error) { return 0, nil }
