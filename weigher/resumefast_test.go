package weigher

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/zeebo/xxh3"

	"github.com/llmguard/llmguard/internal/jsonscan"
)

// fitsByCompare is point.fits as it was written before its bytes were
// compared as one array: the reference TestPointFitsSameAsCompare holds
// it to.
func fitsByCompare(p *point, body string) bool {
	return int(p.k) <= len(body) && string(p.tail[:]) == body[int(p.k)-resumeTailBytes:p.k]
}

// TestPointFitsSameAsCompare: point.fits answers as the string comparison
// it replaced, for points whose tail is the body's, differs from it in one
// byte (each of the 16 places), or whose k lies past the body.
func TestPointFitsSameAsCompare(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	body := make([]byte, 300)
	for i := range body {
		body[i] = byte('a' + r.IntN(3)) // few letters: near misses are common
	}
	s := string(body)
	checked, fit := 0, 0
	for k := resumeMinKey; k <= len(s)+20; k++ {
		for flip := -1; flip < resumeTailBytes; flip++ {
			var p point
			p.k = int32(k)
			if k <= len(s) {
				copy(p.tail[:], s[k-resumeTailBytes:k])
			}
			if flip >= 0 {
				p.tail[flip] ^= 1
			}
			want := k <= len(s) && fitsByCompare(&p, s)
			if got := p.fits(s); got != want {
				t.Fatalf("k %d, byte %d changed: fits %v, the comparison %v", k, flip, got, want)
			}
			checked++
			if want {
				fit++
			}
		}
	}
	if fit == 0 || fit == checked {
		t.Fatalf("%d of %d points fit: the cases do not test both answers", fit, checked)
	}
}

// keyAtByLoop is resumeState.keyAt as a loop over the keys, as it was
// written before: the reference of TestKeyAtSameAsLoop.
func keyAtByLoop(nkeys, k int) int {
	key := -1
	for key+1 < nkeys && resumeMinKey<<(key+1) <= k {
		key++
	}
	return key
}

// TestKeyAtSameAsLoop: keyAt is the index of the longest key not past k,
// as the loop finds it, for every number of keys a body has and every k
// around each key's length.
func TestKeyAtSameAsLoop(t *testing.T) {
	for nkeys := 0; nkeys <= resumeKeyLens; nkeys++ {
		r := resumeState{nkeys: nkeys}
		for i := range resumeKeyLens + 2 {
			n := resumeMinKey << i
			for _, k := range []int{0, 1, n/2 + 1, n - 1, n, n + 1, 2*n - 1} {
				if got, want := r.keyAt(k), keyAtByLoop(nkeys, k); got != want {
					t.Fatalf("%d keys, k %d: keyAt %d, the loop %d", nkeys, k, got, want)
				}
			}
		}
	}
}

// TestForgetLeavesNoResume: a memo's resume state, once forgotten (as done
// leaves it in the pool), uses no point and vouches for nothing it held:
// no checkpoint filed, no remembered sum, tail or members, no pass kept,
// while the hashers stay.
func TestForgetLeavesNoResume(t *testing.T) {
	h := xxh3.NewSeed(7)
	m := &elemMemo{body: `{"messages":[{"role":"user"}],"tools":[]}`}
	var cp checkpoint
	cp.np, cp.nm, cp.count = 1, 3, 42
	cp.points[0].sums.cur.text = 99
	cp.tail.nm, cp.tail.n, cp.tail.toolsSet, cp.tail.tools.text, cp.tail.toolsCtx = 1, 11, true, 5, 3
	m.resume = resumeState{on: true, resumed: true, cp: cp, hasher: h, seed: 7, hashed: 40, base: h, short: h, shortHashed: 30, nkeys: 3, made: 7}
	m.resume.forget()
	r := &m.resume
	if m.resuming() {
		t.Error("resuming after forget: a request that did not look for a point would file one")
	}
	if s, ok := m.resumedSums(42); !ok || s != (resumeSums{}) {
		t.Errorf("resumedSums after forget = %+v, %v; want none", s, ok)
	}
	if tl, ok := m.tailTools(3); ok {
		t.Errorf("tailTools after forget = %+v, true; want none", tl)
	}
	if ms := m.Tail(len(m.body) - 11); ms != nil {
		t.Errorf("Tail after forget = %v; want nil", ms)
	}
	d := doc{lay: &jsonscan.Layout{Members: make([]jsonscan.Member, 4), Tail: 1}, memo: m}
	if before, tail := d.vouchedMembers(); before != 0 || tail != math.MaxInt {
		t.Errorf("vouchedMembers after forget = %d, %d: members vouched for", before, tail)
	}
	if r.base != nil || r.hashed != 0 || r.shortHashed != 0 || r.made != 0 || r.nkeys != 0 {
		t.Errorf("a pass or keys kept after forget: base %v, hashed %d, short %d, made %b, nkeys %d", r.base, r.hashed, r.shortHashed, r.made, r.nkeys)
	}
	if r.hasher != h || r.short != h || r.seed != 7 {
		t.Error("forget dropped the hashers, which the memo keeps between requests")
	}
}
