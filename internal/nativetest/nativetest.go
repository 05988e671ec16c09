// Package nativetest runs a package's heaviest single-goroutine tests in a
// copy of its test binary built without the race detector, from a binary
// that was built with it.
//
// The race detector finds races between goroutines; a test that checks
// arithmetic over megabytes on one goroutine (a counter against
// tiktoken-go, a scanner against its reference at every cut) gives it
// nothing to find, and it multiplies such a test's time 10–400× (weigher:
// 13 tests took 500 of the package's 600 s under `go test -race` on a
// loaded 2-core machine, 15 s without it). Run keeps those tests in the
// README's `go test -race ./...` with every assertion unchanged: under -race
// the test runs in the native binary and its verdict and log become the
// test's own; without -race it runs in place. The native binary keeps
// checkptr (the pointer checks -race turns on) for this module's own
// packages, the ones that use unsafe.
//
// Only tests that start no goroutine of their own, and call no code that
// does, belong here: the others are what -race is for.
package nativetest

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"sync"
	"testing"
	"time"
)

// build is the one native binary of this process: its path, once built,
// the directory that holds it, and the cancelling of a build Prebuild
// started that Remove stops.
var build struct {
	once   sync.Once
	dir    string
	path   string
	err    error
	ctx    context.Context
	cancel context.CancelFunc
}

func init() {
	build.ctx, build.cancel = context.WithCancel(context.Background())
}

// Tag is the build tag the native binary is built with (go test -c -tags
// nativetest): a test file whose tests never run natively, and whose
// imports are costly to compile a second time, opens with
// "//go:build !nativetest" and is left out of that copy. internal/app's
// tests of the OpenAI and Anthropic SDKs do: on a cold build cache the SDKs
// were the bulk of the native build (see TestMain there). A test Run
// sends to the native binary must not be in such a file: Run fails it
// (the binary reports it neither passed nor skipped).
const Tag = "nativetest"

// checkptrFlag keeps checkptr on in the module's own packages (see the
// package comment); the standard library and other modules are compiled as
// they are for any build without -race, so their cached builds are reused.
const checkptrFlag = "-gcflags=github.com/llmguard/llmguard/...=-d=checkptr"

// Binary returns the path of the calling package's tests built again
// without the race detector (go test -c -race=false -tags nativetest: see
// Tag), building them the first time it is called in this process into a
// temporary directory that Remove deletes. The build runs in the working directory, which for a
// test is its package's directory. Its error carries the go command's
// output: a build that fails (no go command on PATH or in GOROOT, a
// compile error) fails every call.
func Binary() (string, error) {
	build.once.Do(func() {
		build.dir, build.err = os.MkdirTemp("", "llmguard-nativetest-")
		if build.err != nil {
			return
		}
		goBin, err := exec.LookPath("go")
		if err != nil {
			goBin = filepath.Join(runtime.GOROOT(), "bin", "go")
		}
		path := filepath.Join(build.dir, "native.test")
		// -vet=off: the race build of the same tests ran go vet already.
		cmd := exec.CommandContext(build.ctx, goBin, "test", "-c", "-race=false", "-vet=off", "-tags", Tag, checkptrFlag, "-o", path, ".")
		if out, err := cmd.CombinedOutput(); err != nil {
			build.err = fmt.Errorf("building the tests without the race detector: %v\n%s", err, out)
			return
		}
		build.path = path
	})
	return build.path, build.err
}

// Prebuild starts Binary's build in the background when this binary was
// built with the race detector and no -test.run pattern narrows the run
// (the whole package's tests, as `go test -race ./...` runs them), so that
// the build overlaps the tests that run under the detector rather than
// adding to the package's time, which go test's -timeout bounds (10
// minutes by default). On a cold build cache the build compiles the
// package's dependencies a second time: internal/app's include the OpenAI
// and Anthropic SDKs, and its build alone passed the 10 minutes on a
// 2-core machine at load 15 when the test that needed it started it. Call
// it from TestMain after flag.Parse; Remove stops a build still running.
func Prebuild() {
	run := ""
	if f := flag.Lookup("test.run"); f != nil {
		run = f.Value.String()
	}
	if prebuilds(run) {
		go Binary()
	}
}

// prebuilds reports whether Prebuild builds for a run narrowed by the
// -test.run pattern run ("" when none).
func prebuilds(run string) bool { return RaceEnabled && run == "" }

// Remove stops a build Prebuild started that is still running and
// deletes the native binary, if one was built. A package whose tests call
// Run or Binary calls it from TestMain after m.Run.
func Remove() {
	build.cancel()
	build.once.Do(func() {}) // waits for a build under way: it writes in build.dir
	if build.dir != "" {
		os.RemoveAll(build.dir)
	}
}

// Run runs the top-level test t in the native binary when this binary was
// built with the race detector, and reports whether it did; the caller
// returns at once when it did:
//
//	if nativetest.Run(t) {
//		return
//	}
//
// The child's output (its t.Log lines included) is logged to t. t is
// skipped when the child skipped it, and fails when the child fails, times
// out (at t's deadline, from -test.timeout), or reports neither passing nor
// skipping t's test (a name the pattern did not find). Run is for top-level tests only: it fails a subtest. -test.short
// is passed on; other flags are not.
func Run(t *testing.T) bool {
	t.Helper()
	if !RaceEnabled {
		return false
	}
	bin, err := Binary()
	if err != nil {
		t.Fatal(err)
	}
	out, skipped, err := runTest(bin, t.Name(), testing.Short(), deadline(t))
	if len(out) > 0 {
		t.Logf("run without the race detector (see internal/nativetest):\n%s", out)
	}
	if err != nil {
		t.Fatal(err)
	}
	if skipped {
		t.Skip("skipped in the native binary")
	}
	return true
}

// deadline is t's deadline, or none (the zero time) when -test.timeout is 0.
func deadline(t *testing.T) time.Time {
	d, _ := t.Deadline()
	return d
}

// runTest runs the top-level test name in the test binary bin and returns
// its combined output and whether the child skipped it. The error is
// non-nil when the child exits non-zero, is killed at the deadline (when
// not zero), or its output reports name as neither passed nor skipped.
func runTest(bin, name string, short bool, deadline time.Time) (out []byte, skipped bool, err error) {
	if bytes.ContainsRune([]byte(name), '/') {
		return nil, false, fmt.Errorf("%s is a subtest: only top-level tests run in the native binary", name)
	}
	ctx := context.Background()
	args := []string{"-test.run", "^" + regexp.QuoteMeta(name) + "$", "-test.v", "-test.count", "1"}
	if !deadline.IsZero() {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, deadline)
		defer cancel()
		args = append(args, "-test.timeout", time.Until(deadline).Round(time.Second).String())
	}
	if short {
		args = append(args, "-test.short")
	}
	cmd := exec.CommandContext(ctx, bin, args...)
	out, err = cmd.CombinedOutput()
	if ctx.Err() != nil {
		return out, false, fmt.Errorf("%s: killed at the test deadline: %v", name, ctx.Err())
	}
	if err != nil {
		return out, false, fmt.Errorf("%s failed without the race detector: %v", name, err)
	}
	switch verdict(out, name) {
	case "PASS":
		return out, false, nil
	case "SKIP":
		return out, true, nil
	}
	return out, false, errors.New(name + ": the native binary reported it neither passed nor skipped (no such test?)")
}

// verdict is name's own verdict line in a -test.v output: PASS, SKIP,
// FAIL, or "" when there is none.
func verdict(out []byte, name string) string {
	m := regexp.MustCompile(`(?m)^--- (PASS|SKIP|FAIL): ` + regexp.QuoteMeta(name) + ` \(`).FindSubmatch(out)
	if m == nil {
		return ""
	}
	return string(m[1])
}
