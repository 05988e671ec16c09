package jsonscan

import "testing"

// TestLayoutKeepsScanner: the checks given one Layout use one scanner,
// kept with the layout and never put in the pool (where another check
// could take it while the layout's next check uses it), and they read
// each document as a fresh scanner does: a duplicate key, a document too
// deep, then valid ones, with and without the layout. Fails when release
// puts a kept scanner back in the pool, or when check ignores the
// layout's scanner.
func TestLayoutKeepsScanner(t *testing.T) {
	docs := []struct {
		doc  string
		want Reason
	}{
		{`{"a":1,"b":[1,2,{"c":3}],"a":2}`, DuplicateKey},
		{`[[[[[[1]]]]]]`, TooDeep},
		{`{"model":"m","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"yo"}]}`, OK},
		{`{"x":"\u00e9","y":[true,false,null]}`, OK},
		{`{"a":1,"A":2}`, CaseVariantKey},
	}
	var lay Layout
	var sc *scanner
	for round := range 3 {
		for i, d := range docs {
			opt := Options{MaxDepth: 4, DuplicateKeys: true, FoldCase: true, UTF8: true}
			want := ReasonOf(Check([]byte(d.doc), opt))
			opt.Layout = &lay
			got := ReasonOf(Check([]byte(d.doc), opt))
			if got != want || got != d.want {
				t.Fatalf("round %d, doc %d: %v with the layout, %v without, want %v", round, i, got, want, d.want)
			}
			if sc == nil {
				sc = lay.sc
			}
			if lay.sc == nil || lay.sc != sc {
				t.Fatalf("round %d, doc %d: the layout's scanner %p, first %p", round, i, lay.sc, sc)
			}
			if sc.b != nil || sc.lay != nil {
				t.Fatalf("round %d, doc %d: the kept scanner holds the document or layout", round, i)
			}
			// Without the race detector the pool's next Get on this
			// goroutine finds what was put last; with it a Put may be
			// dropped, which only lets this pass.
			if p := pool.Get().(*scanner); p == sc {
				t.Fatalf("round %d, doc %d: the layout's scanner is in the pool", round, i)
			} else {
				pool.Put(p)
			}
		}
	}
	if err := Check([]byte(docs[2].doc), Options{FoldCase: true, Layout: &lay}); err != nil || lay.Dropped || len(lay.Members) != 2 || lay.sc != sc {
		t.Fatalf("a valid document after the others: %v, layout %+v", err, lay)
	}
}
