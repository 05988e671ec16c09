//go:build !unix

package loadbench

import "errors"

// selfCPU is unavailable without getrusage.
func selfCPU() (int64, error) {
	return 0, errors.New("loadbench: no getrusage on this system")
}
