package ledger

import (
	"cmp"
	"math"
	"time"
)

// Filter selects records for Summarize. Its zero value selects every record.
type Filter struct {
	// Tenant, when not empty, keeps only that tenant's records.
	Tenant string
	// From (inclusive) and To (exclusive) bound the records' ts; a zero
	// bound is open.
	From, To time.Time
}

// Match reports whether f selects r.
func (f Filter) Match(r Record) bool {
	switch {
	case f.Tenant != "" && r.Tenant != f.Tenant:
		return false
	case !f.From.IsZero() && r.TS.Before(f.From):
		return false
	case !f.To.IsZero() && !r.TS.Before(f.To):
		return false
	}
	return true
}

// Totals add up records. Every count is an exact integer sum over the
// records. First and Last are the earliest and latest ts among them (zero
// when there are none), so that a burn rate is CostMicroUSD over
// Last − First. The zero value is empty totals.
type Totals struct {
	Requests          int64 // records, whatever their status
	Errors            int64 // records whose status is not 2xx
	InputTokens       int64 // includes cached and cache-write tokens
	CachedInputTokens int64
	CacheWriteTokens  int64
	OutputTokens      int64 // includes reasoning tokens
	ReasoningTokens   int64
	CostMicroUSD      int64 // millionths of a US dollar
	First, Last       time.Time
}

// Add adds r to t.
func (t *Totals) Add(r Record) {
	if t.Requests == 0 || r.TS.Before(t.First) {
		t.First = r.TS
	}
	if t.Requests == 0 || r.TS.After(t.Last) {
		t.Last = r.TS
	}
	t.Requests++
	if r.Status < 200 || r.Status > 299 {
		t.Errors++
	}
	t.InputTokens = AddSaturated(t.InputTokens, r.InputTokens)
	t.CachedInputTokens = AddSaturated(t.CachedInputTokens, r.CachedInputTokens)
	t.CacheWriteTokens = AddSaturated(t.CacheWriteTokens, r.CacheWriteTokens)
	t.OutputTokens = AddSaturated(t.OutputTokens, r.OutputTokens)
	t.ReasoningTokens = AddSaturated(t.ReasoningTokens, r.ReasoningTokens)
	t.CostMicroUSD = AddSaturated(t.CostMicroUSD, r.CostMicroUSD)
}

// AddSaturated is a + b, held at math.MaxInt64 or math.MinInt64 where the
// sum would wrap. A record's figures are capped (10^15 tokens, their cost
// at up to some 10^15 micro-USD), but a few thousand such records, which
// an upstream reporting absurd usage can cause on request-only limits,
// would wrap a plain sum into a negative spend.
func AddSaturated(a, b int64) int64 {
	s := a + b
	switch {
	case a > 0 && b > 0 && s < 0:
		return math.MaxInt64
	case a < 0 && b < 0 && s >= 0:
		return math.MinInt64
	}
	return s
}

// UserKey identifies a user within a tenant: user names are the tenant's
// own, so two tenants may both have an "alice".
type UserKey struct {
	Tenant, User string
}

// Summary is the totals of the records a Filter selected, overall and per
// tenant, per user and per model. Each breakdown adds up to Total.
type Summary struct {
	Filter  Filter
	Total   Totals
	Tenants map[string]Totals
	Users   map[UserKey]Totals
	Models  map[string]Totals
	// MaxNames, when above zero, bounds the entries of each breakdown: a
	// record of a tenant, user or model past that many distinct ones is
	// added under OtherName, so that a ledger of caller-chosen model names
	// (up to 256 bytes each) cannot make a summary grow without bound.
	// Zero: no bound.
	MaxNames int
	// MaxModels, when above zero, bounds the model breakdown instead of
	// MaxNames (model names are the callers' own: a reader may keep fewer
	// of them apart than of tenants and users). Zero: MaxNames.
	MaxModels int
	// Unreadable counts the ledger lines the reader skipped (torn or not
	// JSON records), added by the caller that read them: a summary that
	// skipped any is short by their spend.
	Unreadable int64
}

// OtherName is the breakdown entry (tenant, user or model) that gathers the
// records past Summary.MaxNames (models: MaxModels) distinct names.
const OtherName = "(other)"

// NoName is how a breakdown by name (the usage table, the report) labels
// the records without one: a request that named no model (GET /v1/models,
// a multipart upload, a body that is not JSON), a record without a user.
const NoName = "(none)"

// Summarize adds up the records f selects. The maps are never nil.
func Summarize(records []Record, f Filter) Summary {
	s := Summary{
		Filter:  f,
		Tenants: map[string]Totals{},
		Users:   map[UserKey]Totals{},
		Models:  map[string]Totals{},
	}
	for _, r := range records {
		s.Add(r)
	}
	return s
}

// Add adds r to s when s.Filter selects it, and reports whether it did;
// use it to summarize records as they are read instead of holding them all.
// A Summary{Filter: f} is an empty summary: Add makes its maps.
func (s *Summary) Add(r Record) bool {
	if !s.Filter.Match(r) {
		return false
	}
	if s.Tenants == nil {
		s.Tenants, s.Users, s.Models = map[string]Totals{}, map[UserKey]Totals{}, map[string]Totals{}
	}
	s.Total.Add(r)
	add(s.Tenants, r.Tenant, OtherName, s.MaxNames, r)
	add(s.Users, UserKey{r.Tenant, r.User}, UserKey{OtherName, OtherName}, s.MaxNames, r)
	add(s.Models, r.Model, OtherName, cmp.Or(s.MaxModels, s.MaxNames), r)
	return true
}

// add adds r to m[k], or to m[other] when k is new and m already holds max
// entries (max 0: no bound).
func add[K comparable](m map[K]Totals, k, other K, max int, r Record) {
	if _, ok := m[k]; !ok && max > 0 && len(m) >= max {
		k = other
	}
	t := m[k]
	t.Add(r)
	m[k] = t
}
