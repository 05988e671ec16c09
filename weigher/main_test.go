package weigher

import (
	"os"
	"testing"

	"github.com/llmguard/llmguard/internal/nativetest"
)

// TestMain removes the tests' native build (internal/nativetest: under
// -race, the heaviest single-goroutine tests run in a copy of this
// package's tests built without the race detector) once every test has run.
func TestMain(m *testing.M) {
	code := m.Run()
	nativetest.Remove()
	os.Exit(code)
}
