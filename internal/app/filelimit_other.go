//go:build !unix

package app

// fileLimit is 0 (unknown) where there is no RLIMIT_NOFILE: the proxy
// listener's default connection cap is then fasthttp's own (see
// maxConnections).
func fileLimit() uint64 { return 0 }
