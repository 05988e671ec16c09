//go:build !nativetest

package nativetest

// builtWithTag reports whether this test binary was built with the build
// tag Tag, as Binary builds its native copy.
const builtWithTag = false
