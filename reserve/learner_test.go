package reserve

import (
	"fmt"
	"testing"
)

// Until a model has MinSamples outputs the fallback stands; then the
// learned quantile, within [Floor, min(Cap, ceiling)].
func TestLearnerReservation(t *testing.T) {
	l, err := New(Options{MinSamples: 10, Floor: 100, Cap: 5000})
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		name    string
		observe []int64
		key     string
		ceiling int64
		want    int64
		learned bool
	}{
		{name: "unknown model: fallback", key: "gpt-4o", want: 4096},
		{name: "nine samples: fallback", key: "gpt-4o", observe: repeat(500, 9), want: 4096},
		{name: "tenth sample: learned", key: "gpt-4o", observe: []int64{500}, want: 500, learned: true},
		{name: "ceiling below the learned", key: "gpt-4o", ceiling: 300, want: 300, learned: true},
		{name: "floor", key: "small", observe: repeat(3, 10), want: 100, learned: true},
		{name: "cap", key: "big", observe: repeat(90000, 10), want: 5000, learned: true},
	}
	for i, s := range steps {
		for _, v := range s.observe {
			l.Observe(s.key, v)
		}
		got, learned := l.Reservation(s.key, 4096, s.ceiling)
		// A learned quantile is its bucket's upper bound: up to γ above.
		if got < s.want || float64(got) > float64(s.want)*gamma+1 || learned != s.learned {
			t.Errorf("step %d (%s): %d learned=%v, want %d (to %d) learned=%v", i, s.name, got, learned, s.want, int64(float64(s.want)*gamma+1), s.learned)
		}
	}
}

// Memory is bounded: however many model names are observed, at most
// MaxModels sketches exist, the extra names sharing Shared's.
func TestLearnerBoundedModels(t *testing.T) {
	l, err := New(Options{MaxModels: 8, MinSamples: 1})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10000 {
		l.Observe(fmt.Sprintf("model-%d", i), 1000)
	}
	if n := l.Len(); n > 8 {
		t.Fatalf("%d sketches after 10000 names, want at most 8", n)
	}
	if _, learned := l.Reservation(Shared, 1, 0); !learned {
		t.Fatal("the names past MaxModels did not go to the shared sketch")
	}
	if Key("gpt-4o", true) != "gpt-4o" || Key("whatever-a-caller-sends", false) != Shared {
		t.Fatal("Key: priced names keep theirs, unpriced ones share")
	}
}

func TestLearnerOptions(t *testing.T) {
	for _, o := range []Options{{Quantile: 1}, {Quantile: -0.1}, {Floor: 10, Cap: 5}, {MinSamples: -1}} {
		if _, err := New(o); err == nil {
			t.Errorf("New(%+v) accepted", o)
		}
	}
}

func repeat(v int64, n int) []int64 {
	s := make([]int64, n)
	for i := range s {
		s[i] = v
	}
	return s
}
