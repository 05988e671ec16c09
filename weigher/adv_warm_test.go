package weigher

import (
	"strings"
	"testing"
)

// FuzzAdvWarmSequence: a sequence of bodies (of possibly different kinds,
// under possibly different nesting limits sharing one cache) is weighed
// as a fresh plain weigher weighs each.
func FuzzAdvWarmSequence(f *testing.F) {
	a := string(agentBody(2))
	msgs := `{"model":"claude-sonnet-4-5","max_tokens":64,"system":[{"type":"text","text":"` + strings.Repeat("you are terse ", 6) + `"}],"messages":[{"role":"user","content":"` + strings.Repeat("hello there ", 8) + `"}]}`
	f.Add([]byte(a), []byte(strings.Replace(a, `"messages":[`, `"input":[`, 1)), uint8(KindChat), uint8(KindResponses), uint8(3))
	f.Add([]byte(msgs), []byte(strings.Replace(msgs, `"system":[`, `"messages":[`, 1)), uint8(KindMessages), uint8(KindChat), uint8(2))
	f.Add([]byte(a), []byte(a), uint8(KindChat), uint8(KindChat), uint8(4))
	w := cachedWeigher(f, 1<<20)
	f.Fuzz(func(t *testing.T, first, second []byte, k1, k2, d uint8) {
		ka, kb := Kind(k1%uint8(numKinds)), Kind(k2%uint8(numKinds))
		if !ka.Weighed() || !kb.Weighed() {
			return
		}
		w1 := *w
		w1.maxDepth = DefaultMaxDepth
		w1.Weigh(ka, first)
		w1.Weigh(ka, first)
		w2 := *w
		w2.maxDepth = 3 + int(d%8)
		p := plain(t)
		p.maxDepth = w2.maxDepth
		if got, want := w2.Weigh(kb, second), p.Weigh(kb, second); got != want {
			t.Fatalf("%s %q (depth %d) after %s %q: %+v, plain %+v", kb, second, w2.maxDepth, ka, first, got, want)
		}
	})
}
