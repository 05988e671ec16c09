package app

import (
	"flag"
	"os"
	"testing"

	"github.com/llmguard/llmguard/internal/nativetest"
	"github.com/llmguard/llmguard/internal/redistest"
)

// TestMain stops the redis-server and the Redis Cluster the package's tests
// share (redistest.Shared, redistest.SharedCluster: each test gets them
// reset, as fresh ones would be) once every test has run. Tests that kill,
// restart, pause, block or reconfigure a server, and those that need two,
// start their own (redistest.Start). Under -race, the package's tests built
// without the race detector (nativetest.Binary: the memory-limit test's
// children) are built while the other tests run (nativetest.Prebuild),
// unless -short skips that test, and removed at the end. That copy leaves
// out the tests of the OpenAI and Anthropic SDKs (their files open with
// "//go:build !nativetest", see nativetest.Tag): only the memory children
// run in it, and on a cold build cache compiling the two SDKs a second
// time, without the detector, was most of its build.
func TestMain(m *testing.M) {
	flag.Parse()
	if !testing.Short() {
		nativetest.Prebuild()
	}
	code := m.Run()
	redistest.StopShared()
	nativetest.Remove()
	os.Exit(code)
}
