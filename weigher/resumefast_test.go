package weigher

import (
	"bytes"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/zeebo/xxh3"

	"github.com/llmguard/llmguard/internal/jsonscan"

	"github.com/llmguard/llmguard/internal/nativetest"
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

// lookUp runs the resume lookup of w for body as a chat request does,
// with the probe hints or (noHint) without them, and returns the k it
// resumes at (0: none) and how many sets it looked in. It files nothing.
func lookUp(t *testing.T, w *Weigher, body []byte, noHint bool) (k, probes int) {
	t.Helper()
	m := w.cache.memo(string(body), chatFields, w.maxDepth)
	if noHint {
		m.hints = nil
	}
	var lay jsonscan.Layout
	k = m.resumePoint(chatFields, &lay, true)
	probes = m.resume.probes
	m.done()
	return k, probes
}

// TestProbeHintLooksInOneSet: a body grown by a turn from the one weighed
// before it finds that body's checkpoint in the first set it looks in,
// the one its probe hint names, and resumes where the lookup without
// hints resumes, which looks in the longer keys' sets first.
func TestProbeHintLooksInOneSet(t *testing.T) {
	const tail = tailTools + `,"max_tokens":256,"temperature":0.2`
	for _, n := range []int{2, 5, 9, 30} {
		w := cachedWeigher(t, 4<<20)
		w.Chat(tailBody(n, tail))
		next := tailBody(n+1, tail)
		k, probes := lookUp(t, w, next, false)
		k0, probes0 := lookUp(t, w, next, true)
		if k == 0 || k != k0 {
			t.Errorf("%d turns: resumed at %d with the hint, %d without", n, k, k0)
		}
		if probes != 1 {
			t.Errorf("%d turns: looked in %d sets with the hint, want 1 (without: %d)", n, probes, probes0)
		}
		t.Logf("%d turns (%d bytes): sets looked in %d, without the hint %d", n, len(next), probes, probes0)
	}
}

// TestProbeHintNearMissSameEstimates: after a conversation's body has
// filed its checkpoint and probe hint, its next body with any one byte
// changed (each byte in turn: a near miss of the prefix, of the tail, of
// the last 64 bytes the hint is keyed by) is weighed as a weigher
// without a cache weighs it. The hint only orders the sets looked in.
func TestProbeHintNearMissSameEstimates(t *testing.T) {
	if nativetest.Run(t) {
		return
	}
	const tail = tailTools + `,"max_tokens":256,"temperature":0.2`
	w := cachedWeigher(t, 4<<20)
	p := plain(t)
	prev, next := tailBody(6, tail), tailBody(7, tail)
	for i := range next {
		for _, c := range []byte{next[i] ^ 1, ' '} {
			if c == next[i] {
				continue
			}
			w.Chat(prev) // its checkpoint and hint, afresh
			body := bytes.Clone(next)
			body[i] = c
			if got, want := w.Chat(body), p.Chat(body); got != want {
				t.Fatalf("byte %d set to %q: %+v, plain %+v", i, c, got, want)
			}
		}
	}
	if got, want := w.Chat(next), p.Chat(next); got != want {
		t.Fatalf("unchanged: %+v, plain %+v", got, want)
	}
}
