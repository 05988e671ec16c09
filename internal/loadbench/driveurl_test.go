package loadbench

import (
	"testing"

	"github.com/llmguard/llmguard/internal/mockllm"
)

// TestDriveURL: the warm-up, Between, the measured requests and After, in
// that order, against the mock itself.
func TestDriveURL(t *testing.T) {
	s, err := mockllm.StartWith("127.0.0.1:0", mockllm.Options{ByteCountedChat: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var steps []string
	cell := Cell{Shape: Shape{Size: 1 << 10, Warm: true}, Concurrency: 2}
	r, err := DriveURL(DriveOptions{URL: s.URL, Cell: cell, Warmup: 3, Requests: 7,
		Between: func() error { steps = append(steps, "between"); return nil },
		After:   func() error { steps = append(steps, "after"); return nil }})
	if err != nil {
		t.Fatal(err)
	}
	if r.N != 7 || r.Errors != 0 {
		t.Errorf("%d answered, %d failed (%s); want 7, 0", r.N, r.Errors, r.FirstError)
	}
	if len(steps) != 2 || steps[0] != "between" || steps[1] != "after" {
		t.Errorf("steps %v, want [between after]", steps)
	}
}
