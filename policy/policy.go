package policy

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/llmguard/llmguard/bucket"
	"github.com/llmguard/llmguard/config"
	"github.com/llmguard/llmguard/spec"
)

// Principal is who made a request, as found from its credential.
type Principal struct {
	// KeyID is the first 16 hex digits of the SHA-256 of the credential:
	// stable, safe to log, never the key itself.
	KeyID  string
	User   string
	Tenant string
	Plan   string
	// PassThrough is true when the credential is the caller's own upstream
	// key (identity.pass_through), to be forwarded unchanged.
	PassThrough bool
}

// Policy is the compiled, immutable form of a config's keys, models and
// limits: who a caller is, which rules apply, and what a request costs in
// each rule's unit. Safe for concurrent use.
type Policy struct {
	rules  []Rule // narrowest scope first, then config order
	idx    index  // rules by matcher value, for Match
	keys   map[[32]byte]Principal
	prices map[string]modelPrices // by priced name, aliases included
	// folded maps each priced name's spec.FoldModel form to the name, for a
	// model named in another case; "" for a form two priced names share,
	// which then prices neither spelling but the exact ones.
	folded map[string]string
	// canon maps each priced name's spec.CanonModel form to the name, for
	// a model named in another of Ollama's spellings of it (llama3.1 for
	// llama3.1:latest); "" for a form two priced names share, as folded.
	canon map[string]string
	// imagePrices are the per-image prices of models billed per image, in
	// micro-USD (rounded up), keyed by config.ImagePriceKey.
	imagePrices map[string]int64
	// defaultPrice is default_price: the price of a model without one; nil
	// leaves such a model unpriced.
	defaultPrice *Price
	// defaultTier is default_service_tier: the tier of a request that
	// names none.
	defaultTier ServiceTier
	passThrough bool
	ptTenant    string
	ptPlan      string
	// match remembers MatchNames' last answers (matchmemo.go); nil
	// remembers nothing.
	match *matchMemo
}

// Compile builds a Policy from a validated config. Errors: *config.Error
// naming each limit whose compiled bucket is unusable (a rate below a
// thousandth of a unit per period, a fractional rate over a period too long
// to scale; an unknown unit or scope, which Validate refuses).
func Compile(c *config.Config) (*Policy, error) {
	p := &Policy{
		match:       newMatchMemo(),
		keys:        make(map[[32]byte]Principal, len(c.Keys)),
		prices:      buildPrices(c),
		imagePrices: buildImagePrices(c.ImagePrices),
		defaultTier: parseTier(c.DefaultServiceTier),
		passThrough: c.Identity.PassThrough,
		ptTenant:    c.Identity.Tenant,
		ptPlan:      c.Identity.Plan,
	}
	for _, k := range c.Keys {
		var sum [32]byte
		if k.Key != "" {
			sum = sha256.Sum256([]byte(k.Key))
		} else {
			hex.Decode(sum[:], []byte(strings.ToLower(k.KeySHA256)))
		}
		user := k.User
		if user == "" {
			user = hex.EncodeToString(sum[:8])
		}
		p.keys[sum] = Principal{KeyID: hex.EncodeToString(sum[:8]), User: user, Tenant: k.Tenant, Plan: k.Plan}
	}
	p.folded = formNames(p.prices, spec.FoldModel)
	p.canon = formNames(p.prices, spec.CanonModel)
	if c.DefaultPrice != nil {
		dp := usd(*c.DefaultPrice).Price()
		p.defaultPrice = &dp
	}
	var problems []string
	for i, l := range c.Limits {
		_, unitOK := spec.ParseUnit(l.Unit)
		_, scopeOK := spec.ParseScope(l.Scope)
		if !unitOK || !scopeOK { // Validate refuses both: an unvalidated config
			problems = append(problems, fmt.Sprintf("limits[%d]: unknown unit %q or scope %q", i, l.Unit, l.Scope))
			continue
		}
		r := compileRule(l)
		if len(l.Regions) > 0 {
			r.Regional = newRegional(c, l, &r)
			if msg := r.Regional.check(r.wholeLimitAt(time.Now())); msg != "" {
				problems = append(problems, fmt.Sprintf("limits[%d].regions: %s", i, msg))
			}
		}
		if err := r.LimitAt(time.Now()).Validate(); err != nil {
			problems = append(problems, fmt.Sprintf("limits[%d]: rate %v per %v, burst %v does not make a usable bucket (%v): use a larger rate or a shorter period",
				i, l.Rate, time.Duration(l.Per), l.Burst, err))
		} else if r.Shards > bucket.MaxShards {
			problems = append(problems, fmt.Sprintf("limits[%d].shards: %d is more than %d", i, r.Shards, bucket.MaxShards))
		} else if err := bucket.ShardLimit(r.LimitAt(time.Now()), r.Shards, r.Shards-1).Validate(); err != nil {
			// Validate refuses it: every shard holds and refills a unit.
			problems = append(problems, fmt.Sprintf("limits[%d].shards: %d shards do not make usable buckets (%v): use fewer", i, r.Shards, err))
		}
		p.rules = append(p.rules, r)
	}
	if len(problems) > 0 {
		return nil, &config.Error{Problems: problems}
	}
	sort.SliceStable(p.rules, func(i, j int) bool { return p.rules[i].Scope < p.rules[j].Scope })
	p.idx = buildIndex(p.rules)
	return p, nil
}

// Identify finds the principal for a credential (the bearer token or
// x-api-key value) among the config file's keys, else as a pass-through
// caller. ok is false when the credential is empty, or unknown and
// pass-through identity is off. Authenticate also consults stored keys.
func (p *Policy) Identify(credential string) (pr Principal, ok bool) {
	pr, st := p.Authenticate(credential, nil, time.Time{})
	return pr, st == KeyAccepted
}

// Match appends to dst the rules that apply to a request from pr for model
// on reqPath, narrowest scope first (then in config order), and returns it:
// every rule whose Matches is true, found through an index of the rules by
// user, tenant, plan, model and path, so that its cost grows with the rules
// that apply (and those sharing a matcher value with them), not with all
// rules. It allocates only when dst or more than 32 candidates outgrow
// their buffers, or (MatchNames) to remember a new question's answer.
func (p *Policy) Match(dst []*Rule, pr Principal, model, reqPath string) []*Rule {
	return p.MatchNames(dst, pr, []string{model}, reqPath)
}

// MatchNames is Match for a model known by several names (the name sent,
// the priced model a dated snapshot or an alias resolves to): a rule
// applies when it matches any of them, and appears once, in Match's order.
// Empty names are skipped unless they are all there is. The policy
// remembers its last answers (matchmemo.go: up to 256, each for at most
// three names and 512 bytes of text), so a question asked again costs a
// hash and a comparison; the answer is the same either way.
func (p *Policy) MatchNames(dst []*Rule, pr Principal, models []string, reqPath string) []*Rule {
	if p.match == nil || !memoable(&pr, models, reqPath) {
		return p.matchNames(dst, pr, models, reqPath)
	}
	s := p.match.slot(&pr, models, reqPath)
	if e := s.Load(); e != nil && e.is(&pr, models, reqPath) {
		return append(dst, e.rules[:e.nRules]...)
	}
	n := len(dst)
	dst = p.matchNames(dst, pr, models, reqPath)
	remember(s, &pr, models, reqPath, dst[n:])
	return dst
}

// matchNames is MatchNames computed, without the memo.
func (p *Policy) matchNames(dst []*Rule, pr Principal, models []string, reqPath string) []*Rule {
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

// Rules returns the compiled rules, narrowest scope first. The slice must
// not be modified.
func (p *Policy) Rules() []Rule { return p.rules }

// Principals returns every principal of the configured virtual keys,
// ordered by tenant, user and key id.
func (p *Policy) Principals() []Principal {
	out := make([]Principal, 0, len(p.keys))
	for _, pr := range p.keys {
		out = append(out, pr)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Tenant != b.Tenant {
			return a.Tenant < b.Tenant
		}
		if a.User != b.User {
			return a.User < b.User
		}
		return a.KeyID < b.KeyID
	})
	return out
}
