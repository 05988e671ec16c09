package policy

import (
	"slices"
	"strings"

	"github.com/llmguard/llmguard/spec"
)

// index finds the rules that may apply to a request without looking at the
// others, so that matching costs in proportion to the rules that apply (and
// the few that share a matcher value with them), not to every rule.
//
// Each rule is filed under one of its matchers, its anchor: its users, else
// its tenants, else its plans, else its models, else its paths; under each
// value of that list. A rule with no matcher applies to every request (its
// scope only says whose bucket it takes) and is filed under always. A
// request's candidates are the rules filed under its user, tenant, plan,
// model and path, plus always; Match then checks every matcher of each
// candidate, so the index only narrows, and Match returns exactly what a
// scan of every rule returns.
//
// Immutable after buildIndex; safe for concurrent use.
type index struct {
	always                []int32 // rules without matchers, by position in Policy.rules
	users, tenants, plans map[string][]int32
	models, paths         globIndex
}

// globIndex files rules under path.Match globs. A glob without
// metacharacters matches only itself and is filed under exact; any other is
// filed under its literal prefix (the text before its first *, ?, [ or \),
// which every string it matches starts with. With fold (model globs,
// which MatchModel matches whatever the ASCII case), globs are filed and
// strings looked up in spec.FoldModel's form, a glob without
// metacharacters in spec.CanonModel's form too, and a string is also
// looked up as each of its spellings (MatchModelAlias).
type globIndex struct {
	exact   map[string][]int32
	prefix  map[string][]int32
	lengths []int // the distinct lengths of prefix's keys, increasing
	fold    bool
	// spelled: some key of prefix may prefix another Ollama spelling of a
	// name without prefixing the name's canonical form (mayPrefixSpelling),
	// so candidates looks each spelling up too.
	spelled bool
}

// mayPrefixSpelling reports whether the literal prefix p of a glob may
// prefix an Ollama spelling of a model (spec.AppendModelSpellings: its
// canonical form c led by "library/" or "registry.ollama.ai/", or followed
// by ":latest") that does not start with c itself: p reaches into such a
// lead, or holds a ':'.
func mayPrefixSpelling(p string) bool {
	related := func(lead string) bool { return strings.HasPrefix(p, lead) || strings.HasPrefix(lead, p) }
	return p != "" && (strings.Contains(p, ":") || related("library/") || related("registry.ollama.ai/"))
}

// buildIndex files every rule of rules (in order: the lists stay sorted by
// position).
func buildIndex(rules []Rule) index {
	x := index{users: map[string][]int32{}, tenants: map[string][]int32{}, plans: map[string][]int32{},
		models: newGlobIndex(), paths: newGlobIndex()}
	x.models.fold = true
	for i := range rules {
		r, n := &rules[i], int32(i)
		switch {
		case len(r.users) > 0:
			fileEach(x.users, r.users, n)
		case len(r.tenants) > 0:
			fileEach(x.tenants, r.tenants, n)
		case len(r.plans) > 0:
			fileEach(x.plans, r.plans, n)
		case len(r.models) > 0:
			x.models.add(r.models, n)
		case len(r.paths) > 0:
			x.paths.add(r.paths, n)
		default:
			x.always = append(x.always, n)
		}
	}
	return x
}

// fileEach files rule n under each value of values.
func fileEach(m map[string][]int32, values []string, n int32) {
	for _, v := range values {
		file(m, v, n)
	}
}

// file files rule n under v, once: rules are filed in increasing order, so
// a repeat is the list's last entry.
func file(m map[string][]int32, v string, n int32) {
	if l := m[v]; len(l) == 0 || l[len(l)-1] != n {
		m[v] = append(l, n)
	}
}

func newGlobIndex() globIndex {
	return globIndex{exact: map[string][]int32{}, prefix: map[string][]int32{}}
}

func (g *globIndex) add(globs []string, n int32) {
	for _, glob := range globs {
		if g.fold {
			glob = spec.FoldModel(glob)
		}
		i := strings.IndexAny(glob, `*?[\`)
		if i < 0 {
			file(g.exact, glob, n)
			if g.fold {
				file(g.exact, spec.CanonModel(glob), n)
			}
			continue
		}
		p := glob[:i]
		file(g.prefix, p, n)
		g.spelled = g.spelled || g.fold && mayPrefixSpelling(p)
		if !slices.Contains(g.lengths, len(p)) {
			g.lengths = append(g.lengths, len(p))
			slices.Sort(g.lengths)
		}
	}
}

// candidates appends the rules filed under a glob that s may match; with
// fold, as any of its spellings (MatchModelAlias).
func (g *globIndex) candidates(dst []int32, s string) []int32 {
	if !g.fold {
		return g.literal(dst, s)
	}
	s = spec.FoldModel(s)
	dst = g.literal(dst, s)
	c := spec.CanonModel(s) // a part of s: no allocation
	if c != s {
		dst = g.literal(dst, c) // a glob of the same canonical form, a prefix of it
	}
	if !g.spelled {
		return dst
	}
	var buf [6]string
	for _, sp := range spec.AppendModelSpellings(buf[:0], s)[1:] {
		if sp != s {
			dst = g.prefixed(dst, sp)
		}
	}
	return dst
}

// literal appends the rules filed under a glob that s, as spelled, may
// match.
func (g *globIndex) literal(dst []int32, s string) []int32 {
	return g.prefixed(append(dst, g.exact[s]...), s)
}

// prefixed appends the rules filed under a glob with metacharacters whose
// literal prefix s starts with.
func (g *globIndex) prefixed(dst []int32, s string) []int32 {
	for _, n := range g.lengths {
		if n > len(s) {
			break
		}
		dst = append(dst, g.prefix[s[:n]]...)
	}
	return dst
}

// candidates appends the positions of the rules that may apply to a
// request from pr for model on reqPath, in no particular order and possibly
// repeated.
func (x *index) candidates(dst []int32, pr Principal, model, reqPath string) []int32 {
	dst = append(dst, x.always...)
	dst = append(dst, x.users[pr.User]...)
	dst = append(dst, x.tenants[pr.Tenant]...)
	dst = append(dst, x.plans[pr.Plan]...)
	dst = x.models.candidates(dst, model)
	return x.paths.candidates(dst, reqPath)
}
