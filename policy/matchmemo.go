package policy

import (
	"hash/maphash"
	"strings"
	"sync/atomic"
)

// Finding a request's rules (MatchNames: the index's candidates, a sort,
// each candidate's matchers) cost some 1,300 instructions a request
// (callgrind at a112cdd, 1 KiB chat), and a caller's requests nearly
// always ask the same question again: same principal, same model names,
// same path. A Policy's rules never change once compiled, so the answer to
// the same question is the same: matchMemo keeps the last answers.

// matchMemoBits sizes matchMemo: 1<<matchMemoBits slots. 256 keeps a
// node's active callers apart well past the few dozen of a busy tenant
// (with 64, a thousand users cycling missed nearly every time, and each
// miss cost more than the lookup it saves).
const matchMemoBits = 8

// maxMatchMemoText is the most bytes of text (user, tenant, plan, model
// names and path together) a remembered question holds; a longer one is
// answered without the memo.
const maxMatchMemoText = 512

// maxMatchMemoRules is the most rules a remembered answer holds.
const maxMatchMemoRules = 8

// maxMatchMemoModels is the most model names a remembered question has.
const maxMatchMemoModels = 3

// matchMemo keeps, in a direct-mapped table indexed by a randomly seeded
// hash of the question, MatchNames' last answers for its Policy. An entry
// is used only when every part of the question equals the one it was made
// for (the principal's user, tenant and plan, which alone of its fields
// the matchers read; each model name; the path), so its answer is the one
// MatchNames would compute. Memory is bounded: 1<<matchMemoBits entries of
// at most maxMatchMemoText bytes of (copied) text and maxMatchMemoRules
// rule pointers into the policy's own rules; it goes with its Policy. A
// miss allocates one entry. A nil *matchMemo remembers nothing. Safe for
// concurrent use.
type matchMemo struct {
	seed  maphash.Seed
	slots [1 << matchMemoBits]atomic.Pointer[matchEntry]
}

// matchEntry is one question and its answer; never changed once
// published.
type matchEntry struct {
	user, tenant, plan string // substrings of one copy of the question's text
	models             [maxMatchMemoModels]string
	nModels            int
	path               string
	rules              [maxMatchMemoRules]*Rule
	nRules             int
}

func newMatchMemo() *matchMemo { return &matchMemo{seed: maphash.MakeSeed()} }

// memoable reports whether the question fits an entry.
func memoable(pr *Principal, models []string, reqPath string) bool {
	if len(models) > maxMatchMemoModels {
		return false
	}
	n := len(pr.User) + len(pr.Tenant) + len(pr.Plan) + len(reqPath)
	for _, m := range models {
		n += len(m)
	}
	return n <= maxMatchMemoText
}

// slot is the question's slot: the user, the first model name and the
// path hashed, with every length.
func (c *matchMemo) slot(pr *Principal, models []string, reqPath string) *atomic.Pointer[matchEntry] {
	h := maphash.String(c.seed, pr.User)
	h = h*0x9E3779B97F4A7C15 ^ maphash.String(c.seed, reqPath)
	if len(models) > 0 {
		h = h*0x9E3779B97F4A7C15 ^ maphash.String(c.seed, models[0])
	}
	h ^= uint64(len(pr.Tenant))<<40 ^ uint64(len(pr.Plan))<<32 ^ uint64(len(models))<<24
	h *= 0x9E3779B97F4A7C15
	return &c.slots[h>>(64-matchMemoBits)]
}

// is reports whether e was made for the question.
func (e *matchEntry) is(pr *Principal, models []string, reqPath string) bool {
	if e.nModels != len(models) || e.user != pr.User || e.tenant != pr.Tenant || e.plan != pr.Plan || e.path != reqPath {
		return false
	}
	for i, m := range models {
		if e.models[i] != m {
			return false
		}
	}
	return true
}

// remember stores the answer rules to the question in slot s, with one
// copy of the question's text (the caller's strings may live in buffers
// that a later request reuses): two allocations, the entry and the text.
func remember(s *atomic.Pointer[matchEntry], pr *Principal, models []string, reqPath string, rules []*Rule) {
	if len(rules) > maxMatchMemoRules {
		return
	}
	var parts [4 + maxMatchMemoModels]string
	n := copy(parts[:], []string{pr.User, pr.Tenant, pr.Plan, reqPath})
	n += copy(parts[n:], models)
	total := 0
	for _, part := range parts[:n] {
		total += len(part)
	}
	var b strings.Builder
	b.Grow(total)
	var ends [4 + maxMatchMemoModels]int
	for i, part := range parts[:n] {
		b.WriteString(part)
		ends[i] = b.Len()
	}
	text := b.String()
	at := func(i int) string {
		if i == 0 {
			return text[:ends[0]]
		}
		return text[ends[i-1]:ends[i]]
	}
	e := &matchEntry{user: at(0), tenant: at(1), plan: at(2), path: at(3), nModels: len(models), nRules: len(rules)}
	for i := range models {
		e.models[i] = at(4 + i)
	}
	copy(e.rules[:], rules)
	s.Store(e)
}
