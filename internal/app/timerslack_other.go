//go:build !linux

package app

import "time"

// EnsureTimerSlack does nothing on this platform (timer slack is a Linux
// setting) and returns nil.
func EnsureTimerSlack(time.Duration) error { return nil }
