package weigher

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"unsafe"
)

// checkModelName checks that names.name(s) is s, in bytes of its own.
func checkModelName(t *testing.T, names *modelNames, s string) {
	t.Helper()
	b := []byte(s) // the body's bytes, overwritten after
	got := names.name(bodyString(b))
	for i := range b {
		b[i] = 'X'
	}
	if got != s {
		t.Fatalf("name(%q) = %q after the body's bytes changed", s, got)
	}
	if len(s) > 0 && unsafe.StringData(got) == unsafe.SliceData(b) {
		t.Fatalf("name(%q) aliases the body", s)
	}
}

// TestModelNamesCopy: a name comes back equal to the body's and never
// aliasing it, first seen or held, long, empty, or evicted by others in
// its slot; a nil table copies.
func TestModelNamesCopy(t *testing.T) {
	names := new(modelNames)
	list := []string{"gpt-4o-mini", "gpt-4o", "", "x", strings.Repeat("m", maxModelNameBytes+1), "claude-sonnet-4-5"}
	for i := range 200 {
		list = append(list, fmt.Sprintf("model-%d", i))
	}
	for range 3 {
		for _, s := range list {
			checkModelName(t, names, s)
		}
	}
	checkModelName(t, nil, "gpt-4o")
}

// TestEstimateModelIsACopy: the Model of an estimate is the body's model
// name, kept after the caller reuses the body's buffer, on the first
// request naming it and on a later one.
func TestEstimateModelIsACopy(t *testing.T) {
	w := testWeigher(t)
	for step := range 3 {
		body := []byte(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`)
		e := w.Chat(body)
		copy(body[10:], "XXXXXXXXXXX")
		if e.Model != "gpt-4o-mini" {
			t.Fatalf("step %d: Model %q after the body was overwritten", step, e.Model)
		}
	}
}

// TestModelNamesConcurrent: goroutines naming overlapping models (run with
// -race) each get their own name back.
func TestModelNamesConcurrent(t *testing.T) {
	names := new(modelNames)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 5000 {
				s := fmt.Sprintf("model-%d", (i*7+g)%97)
				if got := names.name(s); got != s {
					t.Errorf("name(%q) = %q", s, got)
					return
				}
			}
		})
	}
	wg.Wait()
}
