//go:build !race

package nativetest

// RaceEnabled reports whether this binary was built with the race detector
// (go build -race, go test -race).
const RaceEnabled = false
