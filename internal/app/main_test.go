package app

import (
	"os"
	"testing"

	"github.com/llmguard/llmguard/internal/nativetest"
	"github.com/llmguard/llmguard/internal/redistest"
)

// TestMain stops the redis-server and the Redis Cluster the package's tests
// share (redistest.Shared, redistest.SharedCluster: each test gets them
// reset, as fresh ones would be) once every test has run. Tests that kill,
// restart, pause, block or reconfigure a server, and those that need two,
// start their own (redistest.Start). It also removes the package's tests
// built without the race detector (nativetest.Binary), if a test built them.
func TestMain(m *testing.M) {
	code := m.Run()
	redistest.StopShared()
	nativetest.Remove()
	os.Exit(code)
}
