//go:build !linux

package app

import "time"

// processCPU has no CPU clock to read here: best measures wall time.
func processCPU() (time.Duration, bool) { return 0, false }
