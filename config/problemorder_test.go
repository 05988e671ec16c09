package config

import (
	"errors"
	"strconv"
	"strings"
	"testing"
)

// Parse lists its problems in the order of the lines they name, top of the
// file first, and those that name no line (a field the file lacks) after
// them: an operator fixes a file from the top (trial11: validate listed
// lines 3, 8, 10, 12, 9, 14, 2, 11 — the decoder's problems first, then the
// validator's). Problems of both passes are mixed here: an unknown field, a
// number with a suffix and a duration without a unit (the decoder's), a bad
// scope and a missing flavor (the validator's).
func TestProblemsInLineOrder(t *testing.T) {
	doc := `upstreams:
  - name: openai
    api_key: x
    base_url: http://127.0.0.1:8081
    no_key: true
keys: [{key: k1, user: u, tenant: t}]
limits:
  - {name: a, scope: user, unit: tokens, rate: 10k, per: 1m}
  - {name: b, scope: user, unit: tokens, rate: 100, per: hour}
  - {name: d, scope: org, unit: tokens, rate: 100, per: 1h}
max_retry_wait: 30
`
	_, err := Parse([]byte(doc))
	var ce *Error
	if !errors.As(err, &ce) {
		t.Fatalf("Parse: %v, want *Error", err)
	}
	if len(ce.Problems) < 6 {
		t.Fatalf("%d problems, want at least 6 (lines 2, 3, 8, 9, 10, 11):\n%s", len(ce.Problems), strings.Join(ce.Problems, "\n"))
	}
	prev := 0
	for i, p := range ce.Problems {
		n := problemLine(p)
		if n < prev {
			t.Fatalf("problem %d names line %d after line %d:\n%s", i, n, prev, strings.Join(ce.Problems, "\n"))
		}
		prev = n
	}
	// A problem the validator cannot place comes last.
	doc = "limits:\n  - {name: d, scope: org, unit: tokens, rate: 100, per: 1h}\n"
	_, err = Parse([]byte(doc))
	if !errors.As(err, &ce) {
		t.Fatalf("Parse: %v, want *Error", err)
	}
	last := ce.Problems[len(ce.Problems)-1]
	if !strings.HasPrefix(last, "upstreams: ") || !strings.HasPrefix(ce.Problems[0], "line 2: ") {
		t.Errorf("problems %q: want line 2's first and the missing upstreams' last", ce.Problems)
	}
}

// problemLine reads "line N: " and nothing else as line N; any other text,
// whatever it holds, names no line, and it never panics.
func FuzzProblemLine(f *testing.F) {
	f.Add("line 12: limits[0].scope: must be one of …")
	f.Add("line : x")
	f.Add("line 99999999999999999999999: x")
	f.Add("upstreams: at least one upstream is required")
	f.Fuzz(func(t *testing.T, p string) {
		n := problemLine(p)
		if n < 0 {
			t.Fatalf("problemLine(%q) = %d", p, n)
		}
		if n != noLine && !strings.HasPrefix(p, "line "+strconv.Itoa(n)+": ") {
			t.Fatalf("problemLine(%q) = %d: not the number after \"line \"", p, n)
		}
		if n == 0 {
			t.Fatalf("problemLine(%q) = 0: lines count from 1", p)
		}
	})
}
