package app

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// slackHelperEnv makes TestEnsureTimerSlackHelper act: the test binary
// run again as a child of TestEnsureTimerSlackReachesEveryThread.
const slackHelperEnv = "LLMGUARD_TEST_TIMER_SLACK_HELPER"

// TestEnsureTimerSlackReachesEveryThread runs a child started with a 50 µs
// slack that calls EnsureTimerSlack(1 ms) and then lists every thread's
// slack: all must have 1 ms, the Go runtime's monitor (made before any of
// the child's code ran) and the threads made since included. Setting the
// calling thread's slack alone leaves the monitor and the other threads at
// 50 µs. EnsureTimerSlack returns the 1 ms in force.
func TestEnsureTimerSlackReachesEveryThread(t *testing.T) {
	const start, want = 50 * time.Microsecond, time.Millisecond
	slacks, inForce, comm := runSlackChild(t, start, want)
	for _, s := range slacks {
		tid, ns, _ := strings.Cut(s, " ")
		if ns != strconv.FormatInt(int64(want), 10) {
			t.Errorf("child thread %s: slack %s ns, want %d (all %d threads: %v)", tid, ns, int64(want), len(slacks), slacks)
		}
	}
	if inForce != strconv.FormatInt(int64(want), 10) {
		t.Errorf("EnsureTimerSlack returned %s ns, want %d", inForce, int64(want))
	}
	// Executed again, the process keeps its program's name (the kernel's
	// comm: the file name, at most 15 bytes), not "exe" (trial9).
	name := filepath.Base(os.Args[0])
	if len(name) > 15 {
		name = name[:15]
	}
	if comm != name {
		t.Errorf("the child executed again is named %q (/proc/self/comm), want %q", comm, name)
	}
}

// A child started with a slack above the one asked for (systemd's
// TimerSlackNSec=) keeps it, and EnsureTimerSlack returns it: the start-up
// log names the slack in force, not the one asked for (trial2: it said
// timer_slack=1ms under a 5 ms slack, and under a failure to set it).
func TestEnsureTimerSlackReturnsTheSlackKept(t *testing.T) {
	const start, want = 5 * time.Millisecond, time.Millisecond
	slacks, inForce, _ := runSlackChild(t, start, want)
	for _, s := range slacks {
		tid, ns, _ := strings.Cut(s, " ")
		if ns != strconv.FormatInt(int64(start), 10) {
			t.Errorf("child thread %s: slack %s ns, want the %d it started with (all: %v)", tid, ns, int64(start), slacks)
		}
	}
	if inForce != strconv.FormatInt(int64(start), 10) {
		t.Errorf("EnsureTimerSlack returned %s ns, want the %d kept", inForce, int64(start))
	}
}

// runSlackChild runs TestEnsureTimerSlackHelper as a child started with
// timer slack start, asking for want, and returns what it printed: every
// thread's "<tid> <slack ns>", the slack EnsureTimerSlack returned (ns,
// as text), and the child's name after it (/proc/self/comm).
func runSlackChild(t *testing.T, start, want time.Duration) (slacks []string, inForce, comm string) {
	t.Helper()
	// The child inherits the slack of the thread that starts it.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	old, err := unix.PrctlRetInt(unix.PR_GET_TIMERSLACK, 0, 0, 0, 0)
	if err != nil {
		t.Skip("no PR_GET_TIMERSLACK:", err)
	}
	if err := unix.Prctl(unix.PR_SET_TIMERSLACK, uintptr(start), 0, 0, 0); err != nil {
		t.Skip("no PR_SET_TIMERSLACK:", err)
	}
	defer unix.Prctl(unix.PR_SET_TIMERSLACK, uintptr(old), 0, 0, 0)
	cmd := exec.Command(os.Args[0], "-test.run=^TestEnsureTimerSlackHelper$", "-test.count=1")
	cmd.Env = append(os.Environ(), slackHelperEnv+"="+strconv.FormatInt(int64(want), 10))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if s, ok := strings.CutPrefix(line, "slack "); ok {
			slacks = append(slacks, s)
		}
		if s, ok := strings.CutPrefix(line, "in force "); ok {
			inForce = s
		}
		if s, ok := strings.CutPrefix(line, "comm "); ok {
			comm = s
		}
	}
	if len(slacks) < 3 {
		t.Fatalf("child listed %d threads, want at least 3 (main, monitor, others):\n%s", len(slacks), out)
	}
	return slacks, inForce, comm
}

// TestEnsureTimerSlackHelper is the child of runSlackChild; alone it does
// nothing.
func TestEnsureTimerSlackHelper(t *testing.T) {
	v := os.Getenv(slackHelperEnv)
	if v == "" {
		t.Skip("the child of runSlackChild")
	}
	ns, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	inForce, err := EnsureTimerSlack(time.Duration(ns))
	if err != nil {
		t.Fatal(err)
	}
	os.Stdout.WriteString("in force " + strconv.FormatInt(int64(inForce), 10) + "\n")
	comm, err := os.ReadFile("/proc/self/comm")
	if err != nil {
		t.Fatal(err)
	}
	os.Stdout.WriteString("comm " + strings.TrimSpace(string(comm)) + "\n")
	// Threads made after the call: goroutines locked to threads of their own.
	done := make(chan struct{})
	for range 3 {
		go func() {
			runtime.LockOSThread()
			<-done
		}()
	}
	time.Sleep(20 * time.Millisecond) // the monitor runs meanwhile
	tasks, err := filepath.Glob("/proc/self/task/*")
	if err != nil {
		t.Fatal(err)
	}
	for _, task := range tasks {
		b, err := os.ReadFile(filepath.Join("/proc", filepath.Base(task), "timerslack_ns"))
		if err != nil {
			t.Fatal(err)
		}
		os.Stdout.WriteString("slack " + filepath.Base(task) + " " + strings.TrimSpace(string(b)) + "\n")
	}
	close(done)
}
