package policy

import (
	"fmt"
	"math"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/llmguard/llmguard/bucket"
	"github.com/llmguard/llmguard/config"
	"github.com/llmguard/llmguard/spec"
)

// Scope says whose bucket a rule takes from; defined once in package spec.
type Scope = spec.Scope

// Scopes, narrowest first: the order in which a request's buckets are taken.
const (
	ScopeKey    = spec.ScopeKey
	ScopeUser   = spec.ScopeUser
	ScopeTenant = spec.ScopeTenant
	ScopeGlobal = spec.ScopeGlobal
)

// Unit is what a rule counts; defined once in package spec.
type Unit = spec.Unit

// Units a rule may count.
const (
	UnitRequests     = spec.UnitRequests     // 1 per call
	UnitTokens       = spec.UnitTokens       // input + output tokens
	UnitInputTokens  = spec.UnitInputTokens  // input tokens (cached included)
	UnitOutputTokens = spec.UnitOutputTokens // output tokens (reasoning included)
	UnitUSD          = spec.UnitUSD          // micro-USD
	UnitConcurrent   = spec.UnitConcurrent   // requests in flight (slots)
)

// Period is a quota's calendar period; defined once in package spec.
type Period = spec.Period

// Periods a quota may use, shortest first.
const (
	PeriodDay   = spec.PeriodDay   // from midnight to midnight
	PeriodWeek  = spec.PeriodWeek  // ISO 8601 week: from Monday 00:00
	PeriodMonth = spec.PeriodMonth // from 00:00 on the 1st
)

// Rule is one compiled limit: a token bucket per subject of its scope.
// Rules are immutable after Compile and safe for concurrent use.
type Rule struct {
	Name  string
	Scope Scope
	Unit  Unit
	// Limit is the bucket shape in the rule's units (micro-USD for usd).
	// For a quota only Capacity is set here: LimitAt adds the window.
	Limit bucket.Limit
	// Period is the calendar period of a quota, 0 for a token bucket.
	Period Period
	// Location is the time zone whose midnight starts a quota's period.
	Location *time.Location
	// WarnAt are the used fractions of a quota that trigger a warning,
	// increasing.
	WarnAt []float64
	// FailOpen: while the store is unavailable the rule admits against a
	// per-node fallback bucket; otherwise (fail-closed) it answers 503.
	FailOpen bool
	// PerModel: the rule keeps one bucket per priced model (per_model:
	// true) for each subject of its scope, instead of one bucket shared by
	// every model its matchers fit. See ModelKey.
	PerModel bool
	// Regional splits a global rule between regions (config regions:):
	// nil for a rule that is not split. See Regional.
	Regional *Regional
	// Shards is the number of sub-buckets (shards) each bucket of the rule
	// is split into, 1 for one bucket (config limits[].shards). Each shard
	// holds bucket.ShardLimit(Limit, Shards, i) under ShardKeys(…).Key(i);
	// a rule of one shard uses ModelKey alone.
	Shards int
	// Lease is the rule's lease in its units (micro-USD for usd), labelled
	// with its name; the zero Lease when it has none (a Leased store then
	// takes its buckets as they are). Token buckets only.
	Lease bucket.Lease
	// Shadow: the rule is evaluated and reported but never denies (config
	// limits[].shadow): the meter takes its buckets apart from the real
	// rules', only for requests they admit.
	Shadow bool
	// CapOutput: when this rule cannot pay a request's output reservation
	// but can pay its input plus CapOutputMin tokens of output per
	// completion, admission lowers the request's output maximum to what
	// fits instead of denying it (config limits[].cap_output).
	CapOutput bool
	// CapOutputMin is the least output maximum per completion, in tokens,
	// a CapOutput rule lowers a request to; below it the request is denied.
	CapOutputMin int64
	// MaxWait is the longest a request this rule denies may be held
	// waiting for its buckets (on_limit: wait, max_wait); 0 when the rule
	// fails at once (on_limit: fail). See meter's Waits.
	MaxWait time.Duration

	plans, tenants, users []string
	models, paths         []string // globs
}

// Matches reports whether the rule applies to a request from p for model
// (may be "") on the upstream-relative path.
func (r *Rule) Matches(p Principal, model, reqPath string) bool {
	if len(r.plans) > 0 && !slices.Contains(r.plans, p.Plan) {
		return false
	}
	if len(r.tenants) > 0 && !slices.Contains(r.tenants, p.Tenant) {
		return false
	}
	if len(r.users) > 0 && !slices.Contains(r.users, p.User) {
		return false
	}
	if len(r.models) > 0 && !modelGlobAny(r.models, model) {
		return false
	}
	if len(r.paths) > 0 && !globAny(r.paths, reqPath) {
		return false
	}
	return true
}

// MatchesPrincipal reports whether the rule's plan, tenant and user
// matchers fit p (its model and path matchers are not consulted).
func (r *Rule) MatchesPrincipal(p Principal) bool {
	return (len(r.plans) == 0 || slices.Contains(r.plans, p.Plan)) &&
		(len(r.tenants) == 0 || slices.Contains(r.tenants, p.Tenant)) &&
		(len(r.users) == 0 || slices.Contains(r.users, p.User))
}

// modelGlobAny reports whether model matches one of globs (MatchModel:
// `*` matches across `/`), as any of its spellings (MatchModelAlias).
func modelGlobAny(globs []string, model string) bool {
	for _, g := range globs {
		if MatchModel(g, model) {
			return true
		}
	}
	var buf [6]string
	var sp []string // model's spellings, made on first need; sp[0] is its canonical form
	canon, haveCanon := "", false
	for _, g := range globs {
		if !hasGlobMeta(g) {
			if !haveCanon {
				canon, haveCanon = spec.CanonModel(model), true
			}
			if spec.CanonModel(g) == canon {
				return true
			}
			continue
		}
		if sp == nil {
			sp = spec.AppendModelSpellings(buf[:0], model)
			canon, haveCanon = sp[0], true
		}
		for _, s := range sp {
			if MatchModel(g, s) {
				return true
			}
		}
	}
	return false
}

// globAny reports whether s matches one of globs (path.Match: `*` stops
// at `/`), the syntax of path matchers.
func globAny(globs []string, s string) bool {
	for _, g := range globs {
		if ok, _ := path.Match(g, s); ok {
			return true
		}
	}
	return false
}

// Key is the store key of the bucket this rule uses for principal p:
// llmguard:{<tenant>}:<rule>:<subject>, or llmguard:{global}:<rule> for the
// global scope. The hash tag {…} keeps a tenant's and its users' buckets in
// one Redis Cluster slot. Ids are escaped (see escapeID) so that no id can
// forge another's key. A rule split between regions has its region's key,
// llmguard:{global}:<rule>;region=<region> (Regional.Key).
func (r *Rule) Key(p Principal) string {
	if r.Scope == ScopeGlobal {
		if r.Regional != nil {
			return r.Regional.Key()
		}
		return "llmguard:{global}:" + r.Name
	}
	subject := r.subject(p)
	var b strings.Builder
	b.Grow(len("llmguard:{}::") + 2*len(p.Tenant) + len(r.Name) + len(subject))
	b.WriteString("llmguard:{")
	escapeID(&b, p.Tenant)
	b.WriteString("}:")
	b.WriteString(r.Name)
	b.WriteByte(':')
	escapeID(&b, subject)
	return b.String()
}

// subject is the id of p whose bucket the rule keeps: its key id, user or
// tenant by scope; "" for the global scope.
func (r *Rule) subject(p Principal) string {
	switch r.Scope {
	case ScopeKey:
		return p.KeyID
	case ScopeUser:
		return p.User
	case ScopeTenant:
		return p.Tenant
	}
	return ""
}

// UnpricedModelKey is the model segment of a per-model bucket key for a
// request whose model has no price (or names none): every such model
// shares that one bucket. escapeID writes '%' as "%25", so no model name
// can produce it.
const UnpricedModelKey = "%unpriced"

// ModelKey is the store key of the bucket this rule uses for principal p
// and a request priced as model label (Quote.Label: the priced name a
// dated snapshot or a name resolves to; "" for a model without a price).
// Without PerModel it is Key(p). With PerModel it is Key(p) followed by
// ":" and the escaped label, or ":" and UnpricedModelKey when label is "":
// so that the buckets of one rule are bounded by the models the config
// prices, and a caller cannot open a fresh bucket by inventing a model
// name.
func (r *Rule) ModelKey(p Principal, label string) string {
	var buf [128]byte // most keys fit: one allocation, the string's
	return string(r.AppendModelKey(buf[:0], p, label))
}

// AppendModelKey appends ModelKey(p, label) to b and returns the extended
// buffer, so that a caller naming several buckets can build their keys in
// one buffer (meter builds a request's keys as one string).
func (r *Rule) AppendModelKey(b []byte, p Principal, label string) []byte {
	switch {
	case r.Scope == ScopeGlobal && r.Regional != nil:
		b = append(b, r.Regional.Key()...)
	case r.Scope == ScopeGlobal:
		b = append(append(b, "llmguard:{global}:"...), r.Name...)
	default:
		b = appendEscapedID(append(b, "llmguard:{"...), p.Tenant)
		b = append(append(append(b, "}:"...), r.Name...), ':')
		b = appendEscapedID(b, r.subject(p))
	}
	if !r.PerModel {
		return b
	}
	b = append(b, ':')
	if label == "" {
		return append(b, UnpricedModelKey...)
	}
	return appendEscapedID(b, label)
}

// ShardKeys names the shards of the bucket this rule uses for principal p
// and model label (as ModelKey), when Shards is 2 or more: shard i's key is
// ModelKey's with the shard number added to its hash tag after a colon,
// llmguard:{<tenant>:<i>}:<rule>:<subject>[:<model>], or
// llmguard:{global:<i>}:<rule>[:<model>] for the global scope. Each shard
// has a hash tag of its own, so shards lie in different Redis Cluster
// slots (distinct tags may still share a slot, as any two keys may). An
// escaped id never holds a colon (escapeID), so the colon in the tag marks
// the shard number: no tenant id can forge another tenant's shard, or be
// taken for one. A rule of one shard keeps ModelKey's key.
func (r *Rule) ShardKeys(p Principal, label string) bucket.ShardKeys {
	var pre, suf strings.Builder
	if r.Scope == ScopeGlobal {
		pre.WriteString("llmguard:{global:")
		suf.WriteString("}:")
		suf.WriteString(r.Name)
	} else {
		pre.Grow(len("llmguard:{:") + 2*len(p.Tenant))
		pre.WriteString("llmguard:{")
		escapeID(&pre, p.Tenant)
		pre.WriteByte(':')
		suf.WriteString("}:")
		suf.WriteString(r.Name)
		suf.WriteByte(':')
		escapeID(&suf, r.subject(p))
	}
	if r.PerModel {
		suf.WriteByte(':')
		if label == "" {
			suf.WriteString(UnpricedModelKey)
		} else {
			escapeID(&suf, label)
		}
	}
	return bucket.ShardKeys{Prefix: pre.String(), Suffix: suf.String()}
}

// LimitOfKey returns the limit name of a bucket key built by Key, ModelKey
// or ShardKeys (llmguard:{<tag>}:<limit>…), and false for any other
// string. The name is whatever the key holds: check it against the rules
// before trusting it as a bounded label.
func LimitOfKey(key string) (string, bool) {
	rest, ok := strings.CutPrefix(key, "llmguard:{")
	if !ok {
		return "", false
	}
	end := strings.Index(rest, "}:") // an escaped id holds no '}'
	if end < 0 {
		return "", false
	}
	name := rest[end+2:]
	if i := strings.IndexByte(name, ':'); i >= 0 {
		name = name[:i]
	}
	return name, name != ""
}

// MatchesModel reports whether the rule's model matchers fit model (true
// when it has none).
func (r *Rule) MatchesModel(model string) bool {
	return len(r.models) == 0 || modelGlobAny(r.models, model)
}

// escapeID writes id with '%', '{', '}' and ':' percent-encoded, so an id
// can neither close the hash tag nor add a key segment.
// appendEscapedID is escapeID appending to a byte slice.
func appendEscapedID(b []byte, id string) []byte {
	const hexDigits = "0123456789ABCDEF"
	for i := 0; i < len(id); i++ {
		switch c := id[i]; c {
		case '%', '{', '}', ':':
			b = append(b, '%', hexDigits[c>>4], hexDigits[c&15])
		default:
			b = append(b, c)
		}
	}
	return b
}

func escapeID(b *strings.Builder, id string) {
	const hexDigits = "0123456789ABCDEF"
	for i := 0; i < len(id); i++ {
		c := id[i]
		switch c {
		case '%', '{', '}', ':':
			b.WriteByte('%')
			b.WriteByte(hexDigits[c>>4])
			b.WriteByte(hexDigits[c&15])
		default:
			b.WriteByte(c)
		}
	}
}

// IsQuota reports whether the rule is a calendar quota.
func (r *Rule) IsQuota() bool { return r.Period != 0 }

// LimitAt is the bucket the rule takes from at now: its token bucket, or
// for a quota the Capacity over the calendar period containing now. A rule
// split between regions gives its region's share of it at now (capacity
// and rate, or the quota, scaled by Regional.Share, rounded down).
func (r *Rule) LimitAt(now time.Time) bucket.Limit {
	l := r.wholeLimitAt(now)
	if r.Regional != nil {
		l, _ = scaleLimit(l, r.Regional.Share(now)) // Compile checked every share allowed
	}
	return l
}

// LimitIsFixed reports whether LimitAt gives the rule's Limit at every
// instant (a token bucket not split between regions), so that a caller
// need not read a clock for it; false for a quota (its window) or a
// regional rule (its share), whose limit is LimitAt's at the instant.
func (r *Rule) LimitIsFixed() bool { return r.Period == 0 && r.Regional == nil }

// wholeLimitAt is LimitAt before a region's share: the whole limit.
func (r *Rule) wholeLimitAt(now time.Time) bucket.Limit {
	if r.Period == 0 {
		return r.Limit
	}
	start, end := r.Period.Window(now, r.Location)
	return bucket.Quota(r.Limit.Capacity, start, end)
}

// compileRule turns a validated config limit into a Rule. Dollar amounts
// become micro-USD. A rate that is not a whole number of units per period is
// kept to a thousandth of a unit by scaling Rate and Per by 1000.
func compileRule(l config.Limit) Rule {
	scale := 1.0
	unit, _ := spec.ParseUnit(l.Unit)    // Compile has refused an unknown unit
	scope, _ := spec.ParseScope(l.Scope) // and an unknown scope
	// Validate refuses any on_failure but open and closed; an unvalidated
	// config's other value is the default, open.
	onFailure, _ := spec.ParseFailureMode(l.OnFailure)
	failOpen := onFailure == spec.FailOpen
	if unit == UnitUSD {
		scale = 1e6
	}
	if unit == UnitConcurrent {
		return Rule{
			Name: l.Name, Scope: scope, Unit: unit,
			Limit:    bucket.Slots(int64(l.Max), time.Duration(l.SlotLease)),
			FailOpen: failOpen,
			PerModel: l.PerModel,
			Shards:   1,
			Shadow:   l.Shadow,
			plans:    l.Plans, tenants: l.Tenants, users: l.Users, models: l.Models, paths: l.Paths,
		}
	}
	if l.Quota != 0 {
		period, _ := spec.ParsePeriod(l.Period) // Validate refuses an unknown period
		loc, err := time.LoadLocation(l.Timezone)
		if err != nil {
			loc = time.UTC // Validate has refused it already
		}
		return Rule{
			Name: l.Name, Scope: scope, Unit: unit,
			Limit:     bucket.Limit{Capacity: int64(math.Floor(l.Quota * scale))},
			Period:    period,
			Location:  loc,
			WarnAt:    l.WarnAt,
			FailOpen:  failOpen,
			PerModel:  l.PerModel,
			Shards:    max(1, int(l.Shards)),
			Shadow:    l.Shadow,
			MaxWait:   maxWait(l),
			CapOutput: l.CapOutput, CapOutputMin: capOutputMin(l),
			plans: l.Plans, tenants: l.Tenants, users: l.Users, models: l.Models, paths: l.Paths,
		}
	}
	rate, per := l.Rate*scale, time.Duration(l.Per)
	if rate != math.Trunc(rate) {
		if per > math.MaxInt64/1000 {
			per = 0 // cannot scale: Compile reports the limit invalid
		}
		rate, per = math.Round(rate*1000), per*1000
	}
	limit := bucket.Limit{
		Capacity: int64(math.Floor(l.Burst * scale)),
		Rate:     int64(rate),
		Per:      per,
	}
	if a, _ := spec.ParseAlgorithm(l.Algorithm); a != spec.TokenBucket { // "" is TokenBucket; Compile has refused an unknown name
		limit = bucket.Window(a, int64(math.Floor(l.Rate*scale)), time.Duration(l.Per))
	}
	return Rule{
		Name:      l.Name,
		Scope:     scope,
		Unit:      unit,
		Limit:     limit,
		FailOpen:  failOpen,
		PerModel:  l.PerModel,
		Shards:    max(1, int(l.Shards)),
		Lease:     compileLease(l, scale),
		Shadow:    l.Shadow,
		MaxWait:   maxWait(l),
		CapOutput: l.CapOutput, CapOutputMin: capOutputMin(l),
		plans:   l.Plans,
		tenants: l.Tenants,
		users:   l.Users,
		models:  l.Models,
		paths:   l.Paths,
	}
}

// String describes the rule for messages: "user-tpm (20000 tokens, refill
// 10000 per 1m0s)", "user-rpm (60 requests per 1m0s, sliding_window)" or
// "acme-monthly (500000000 usd per month)".
func (r *Rule) String() string {
	if r.Unit == UnitConcurrent {
		if r.Limit.Capacity == 1 {
			return r.Name + " (1 request in flight)"
		}
		return fmt.Sprintf("%s (%d requests in flight)", r.Name, r.Limit.Capacity)
	}
	if r.IsQuota() {
		return fmt.Sprintf("%s (%d %s per %s)", r.Name, r.Limit.Capacity, r.Unit, r.Period)
	}
	if r.Limit.IsWindow() {
		return fmt.Sprintf("%s (%d %s per %s, %s)", r.Name, r.Limit.Capacity, r.Unit, r.Limit.Per, r.Limit.Algorithm)
	}
	return fmt.Sprintf("%s (%d %s, refill %d per %s)", r.Name, r.Limit.Capacity, r.Unit, r.Limit.Rate, r.Limit.Per)
}

// compileLease is l's lease in the rule's units (a size in dollars becomes
// micro-USD, rounded down), labelled with the limit's name; the zero Lease
// when l has none.
func compileLease(l config.Limit, scale float64) bucket.Lease {
	if l.Lease == nil {
		return bucket.Lease{}
	}
	return bucket.Lease{Size: int64(math.Floor(l.Lease.Size * scale)), TTL: time.Duration(l.Lease.TTL), Label: l.Name}
}

// DefaultCapOutputMin is a cap_output limit's cap_output_min when unset, in
// tokens: a reply shorter than this is seldom worth sending.
const DefaultCapOutputMin = 256

// capOutputMin is l's cap_output_min in tokens, defaulted.
func capOutputMin(l config.Limit) int64 {
	if l.CapOutputMin > 0 {
		return l.CapOutputMin
	}
	return DefaultCapOutputMin
}

// maxWait is l's max_wait under on_limit: wait, 0 otherwise.
func maxWait(l config.Limit) time.Duration {
	if !l.Waits() {
		return 0
	}
	if l.MaxWait == 0 {
		return config.DefaultMaxWait
	}
	return time.Duration(l.MaxWait)
}

// ModelGlobs are the rule's model matchers (globs), nil when it has none.
// The caller must not change them.
func (r *Rule) ModelGlobs() []string { return r.models }

// PathGlobs are the rule's path matchers (globs), nil when it has none.
// The caller must not change them.
func (r *Rule) PathGlobs() []string { return r.paths }

// Tenants are the tenants the rule is limited to (the limit's `tenants:`),
// nil when it applies to every tenant. The caller must not change them.
func (r *Rule) Tenants() []string { return r.tenants }
