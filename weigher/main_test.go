package weigher

import (
	"flag"
	"os"
	"testing"

	"github.com/llmguard/llmguard/internal/nativetest"
)

// TestMain starts the tests' native build (internal/nativetest: under
// -race, the heaviest single-goroutine tests run in a copy of this
// package's tests built without the race detector) while the others run,
// and removes it once every test has run.
func TestMain(m *testing.M) {
	flag.Parse()
	nativetest.Prebuild()
	code := m.Run()
	nativetest.Remove()
	os.Exit(code)
}
