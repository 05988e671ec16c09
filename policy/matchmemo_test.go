package policy

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"unsafe"
)

// matchNamesOracle is MatchNames as it was before matchMemo (a112cdd),
// kept verbatim as the oracle of the differential tests.
func matchNamesOracle(p *Policy, dst []*Rule, pr Principal, models []string, reqPath string) []*Rule {
	var buf [32]int32
	c := buf[:0]
	for i, m := range models {
		if m != "" || i == 0 {
			c = p.idx.candidates(c, pr, m, reqPath)
		}
	}
	slices.Sort(c) // positions in p.rules: narrowest scope, then config order
	prev := int32(-1)
	for _, i := range c {
		if i == prev {
			continue
		}
		prev = i
		for j, m := range models {
			if (m != "" || j == 0) && p.rules[i].Matches(pr, m, reqPath) {
				dst = append(dst, &p.rules[i])
				break
			}
		}
	}
	return dst
}

// matchPolicy has rules on every matcher: users, tenants, plans, model
// globs and path globs, some combined, more than maxMatchMemoRules of
// them applying to some questions.
func matchPolicy(t testing.TB) *Policy {
	t.Helper()
	p, err := Compile(mustConfig(t, `
upstreams: [{name: o, flavor: openai, base_url: "http://x"}]
limits:
  - {name: g1, scope: global, unit: requests, rate: 10, per: 1s}
  - {name: g2, scope: global, unit: requests, rate: 10, per: 1s, models: ["gpt-4o*"]}
  - {name: g3, scope: global, unit: requests, rate: 10, per: 1s, paths: ["/v1/chat/*"]}
  - {name: t1, scope: tenant, unit: tokens, rate: 10, per: 1s, tenants: [acme]}
  - {name: t2, scope: tenant, unit: tokens, rate: 10, per: 1s, tenants: [beta, acme], models: ["gpt-4o-mini"]}
  - {name: u1, scope: user, unit: tokens, rate: 10, per: 1s, users: [alice]}
  - {name: u2, scope: user, unit: tokens, rate: 10, per: 1s, users: [bob], paths: ["/v1/*"]}
  - {name: p1, scope: user, unit: tokens, rate: 10, per: 1s, plans: [free]}
  - {name: p2, scope: user, unit: tokens, rate: 10, per: 1s, plans: [pro], models: ["claude-*"]}
  - {name: k1, scope: key, unit: requests, rate: 10, per: 1s}
  - {name: k2, scope: key, unit: requests, rate: 10, per: 1s, models: ["gpt-5*", "o3"]}
  - {name: k3, scope: key, unit: requests, rate: 10, per: 1s, paths: ["/v1/embeddings"]}
`))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// The pools the differential tests draw questions from; "" and a name
// longer than the memo holds are among them.
var (
	matchUsers   = []string{"alice", "bob", "carol", "", "alice2"}
	matchTenants = []string{"acme", "beta", "", "gamma"}
	matchPlans   = []string{"free", "pro", ""}
	matchModels  = []string{"gpt-4o", "gpt-4o-mini", "gpt-5-pro", "o3", "claude-3", "", "gpt-4o-mini-2024-07-18", strings.Repeat("m", maxMatchMemoText)}
	matchPaths   = []string{"/v1/chat/completions", "/v1/embeddings", "/v1/responses", "/other", ""}
)

// question picks a question from the pools by the bytes of b.
func question(b []byte) (Principal, []string, string) {
	at := func(i int) int {
		if i < len(b) {
			return int(b[i])
		}
		return 0
	}
	pr := Principal{KeyID: fmt.Sprint(at(0)), User: matchUsers[at(0)%len(matchUsers)], Tenant: matchTenants[at(1)%len(matchTenants)],
		Plan: matchPlans[at(2)%len(matchPlans)]}
	models := make([]string, at(3)%(maxMatchMemoModels+2)) // up to one more than the memo holds
	for i := range models {
		models[i] = matchModels[at(4+i)%len(matchModels)]
	}
	return pr, models, matchPaths[at(9)%len(matchPaths)]
}

// checkMatch asks p the question and compares with the oracle, on a dst
// that already holds a rule (MatchNames appends).
func checkMatch(t testing.TB, step string, p *Policy, pr Principal, models []string, reqPath string) {
	t.Helper()
	pre := &p.rules[0]
	got := p.MatchNames([]*Rule{pre}, pr, models, reqPath)
	want := matchNamesOracle(p, []*Rule{pre}, pr, models, reqPath)
	if !slices.Equal(got, want) {
		t.Fatalf("%s: %+v %q %q: %v, oracle %v", step, pr, models, reqPath, ruleNames(got), ruleNames(want))
	}
}

func ruleNames(rs []*Rule) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.Name)
	}
	return out
}

func TestMatchMemoRandom(t *testing.T) {
	p := matchPolicy(t)
	rng := rand.New(rand.NewPCG(3, 4))
	b := make([]byte, 10)
	for i := range 20000 {
		for j := range b {
			b[j] = byte(rng.Uint32())
		}
		pr, models, path := question(b)
		checkMatch(t, fmt.Sprintf("question %d", i), p, pr, models, path)
	}
}

// The memo keeps copies of a question's text: a caller whose strings live
// in a buffer it reuses (as fasthttp's do) and that now holds another
// question of the same slot gets that question's answer, not the answer
// remembered for the buffer's old text.
func TestMatchMemoCopiesText(t *testing.T) {
	p := matchPolicy(t)
	pr := Principal{User: "carol", Tenant: "gamma", Plan: "pro"}
	models := []string{"gpt-4o"}
	q1 := "/v1/embeddings" // k3 applies
	var q2 string          // same length and slot, no path rule applies
	for i := 0; q2 == ""; i++ {
		if c := fmt.Sprintf("/zz/%010d", i); p.match.slot(&pr, models, c) == p.match.slot(&pr, models, q1) {
			q2 = c
		}
	}
	buf := []byte(q1)
	path := unsafe.String(&buf[0], len(buf))
	checkMatch(t, "step 1 (q1 from the buffer)", p, pr, models, path)
	copy(buf, q2)
	checkMatch(t, "step 2 (the buffer now holds q2)", p, pr, models, strings.Clone(q2))
	checkMatch(t, "step 3 (q1 again)", p, pr, models, q1)
}

// The memo holds at most its slots, each answer no more than
// maxMatchMemoRules rules.
func TestMatchMemoBound(t *testing.T) {
	p := matchPolicy(t)
	for i := range 1000 {
		p.MatchNames(nil, Principal{User: fmt.Sprint("u", i)}, []string{"gpt-4o"}, "/v1/chat/completions")
	}
	n := 0
	for i := range p.match.slots {
		if e := p.match.slots[i].Load(); e != nil {
			n++
			if len(e.rules) > maxMatchMemoRules {
				t.Fatalf("slot %d: %d rules", i, len(e.rules))
			}
		}
	}
	if n > 1<<matchMemoBits {
		t.Fatalf("%d entries", n)
	}
}

// FuzzMatchMemo: any sequence of questions is answered as the oracle
// answers it.
//
//	go test -run X -fuzz FuzzMatchMemo -fuzztime 60s ./policy
func FuzzMatchMemo(f *testing.F) {
	f.Add([]byte{0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 1, 1, 1, 2, 1, 2, 3, 0, 0, 1})
	f.Add([]byte{1, 1, 1, 3, 1, 2, 3, 0, 0, 0})
	p := matchPolicy(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		for len(b) > 0 {
			pr, models, path := question(b)
			checkMatch(t, "question", p, pr, models, path)
			b = b[min(len(b), 10):]
		}
	})
}

// Concurrent questions sharing slots: no race (under -race), every answer
// the oracle's.
func TestMatchMemoConcurrent(t *testing.T) {
	p := matchPolicy(t)
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 9))
			b := make([]byte, 10)
			for range 2000 {
				for j := range b {
					b[j] = byte(rng.Uint32())
				}
				pr, models, path := question(b)
				got := p.MatchNames(nil, pr, models, path)
				if want := matchNamesOracle(p, nil, pr, models, path); !slices.Equal(got, want) {
					t.Errorf("%+v %q %q: %v, oracle %v", pr, models, path, ruleNames(got), ruleNames(want))
					return
				}
			}
		}()
	}
	wg.Wait()
}

func BenchmarkMatchNames(b *testing.B) {
	p := matchPolicy(b)
	pr := Principal{User: "alice", Tenant: "acme", Plan: "free"}
	models := []string{"gpt-4o-mini", "gpt-4o-mini", ""}
	var dst [8]*Rule
	b.Run("computed", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			p.matchNames(dst[:0], pr, models, "/v1/chat/completions")
		}
	})
	b.Run("memo", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			p.MatchNames(dst[:0], pr, models, "/v1/chat/completions")
		}
	})
}
