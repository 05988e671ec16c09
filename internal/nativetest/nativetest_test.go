package nativetest

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestMain(m *testing.M) {
	flag.Parse()
	Prebuild()
	code := m.Run()
	Remove()
	os.Exit(code)
}

// childEnv makes TestFailsNatively fail when it runs natively.
const childEnv = "LLMGUARD_NATIVETEST_FAIL"

// TestRunsNatively: under -race, Run runs the test in a binary built
// without it (where RaceEnabled is false) and reports that it did; without
// -race, Run reports it did not and the test goes on in place.
func TestRunsNatively(t *testing.T) {
	if Run(t) {
		if !RaceEnabled {
			t.Fatal("Run reported running natively in a binary without -race")
		}
		return
	}
	if RaceEnabled {
		t.Fatal("under -race, Run ran the test in place")
	}
	t.Log("native run: the race detector is off here")
}

// TestNativeCopyHasTheTag: the native binary (Binary's native.test) is
// built with the build tag Tag, so files opening with "//go:build
// !nativetest" are left out of it; a test binary go test builds is not.
func TestNativeCopyHasTheTag(t *testing.T) {
	if Run(t) {
		return
	}
	native := filepath.Base(os.Args[0]) == "native.test"
	if native != builtWithTag {
		t.Fatalf("binary %s built with the tag %q: %v, want %v", os.Args[0], Tag, builtWithTag, native)
	}
}

// TestFailsNatively fails when childEnv is "fail" and skips when it is
// "skip": runTest's other verdicts.
func TestFailsNatively(t *testing.T) {
	switch os.Getenv(childEnv) {
	case "fail":
		t.Fatal("failing as asked")
	case "skip":
		t.Skip("skipping as asked")
	}
}

// TestPrebuilds: the background build starts only under -race and for a
// run no -test.run pattern narrows.
func TestPrebuilds(t *testing.T) {
	if got := prebuilds(""); got != RaceEnabled {
		t.Errorf("the whole package: prebuilds %v, want %v (race %v)", got, RaceEnabled, RaceEnabled)
	}
	if prebuilds("^TestOne$") {
		t.Error("a run narrowed to one test prebuilds")
	}
}

// TestRunTestVerdicts: runTest reports a failing child, a name that matched
// no test, a subtest name, and a child killed at its deadline as errors, and
// a passing one as passed.
func TestRunTestVerdicts(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the package's tests again")
	}
	bin, err := Binary()
	if err != nil {
		t.Fatal(err)
	}
	if out, skipped, err := runTest(bin, "TestFailsNatively", false, time.Time{}); err != nil || skipped {
		t.Fatalf("a passing test: skipped %v, err %v\n%s", skipped, err, out)
	}
	t.Setenv(childEnv, "skip")
	if out, skipped, err := runTest(bin, "TestFailsNatively", false, time.Time{}); err != nil || !skipped {
		t.Errorf("a skipped test: skipped %v, err %v\n%s", skipped, err, out)
	}
	t.Setenv(childEnv, "fail")
	if _, _, err := runTest(bin, "TestFailsNatively", false, time.Time{}); err == nil || !strings.Contains(err.Error(), "failed") {
		t.Errorf("a failing test: err %v", err)
	}
	if _, _, err := runTest(bin, "TestNoSuchTest", false, time.Time{}); err == nil || !strings.Contains(err.Error(), "neither") {
		t.Errorf("a test that does not exist: err %v", err)
	}
	if _, _, err := runTest(bin, "TestRunsNatively/sub", false, time.Time{}); err == nil {
		t.Error("a subtest: no error")
	}
	if _, _, err := runTest(bin, "TestFailsNatively", false, time.Now().Add(-time.Second)); err == nil || !strings.Contains(err.Error(), "deadline") {
		t.Errorf("a deadline already past: err %v", err)
	}
}

// TestVerdictLine: only the test's own verdict line counts, not a
// subtest's or that of another test whose name it begins.
func TestVerdictLine(t *testing.T) {
	for _, c := range []struct{ out, want string }{
		{"=== RUN   TestA\n--- PASS: TestA (0.00s)\nPASS\n", "PASS"},
		{"=== RUN   TestA\n--- SKIP: TestA (0.00s)\nPASS\n", "SKIP"},
		{"=== RUN   TestAB\n--- PASS: TestAB (0.00s)\nPASS\n", ""},
		{"    --- PASS: TestA/x (0.00s)\n--- FAIL: TestA (0.00s)\n", "FAIL"},
		{"testing: warning: no tests to run\nPASS\n", ""},
	} {
		if got := verdict([]byte(c.out), "TestA"); got != c.want {
			t.Errorf("verdict(%q) = %q, want %q", c.out, got, c.want)
		}
	}
}
