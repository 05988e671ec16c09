package app

import (
	"cmp"
	"fmt"
	"maps"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/llmguard/llmguard/config"
	"github.com/llmguard/llmguard/internal/suggest"
	"github.com/llmguard/llmguard/policy"
	"github.com/llmguard/llmguard/spec"
	"github.com/llmguard/llmguard/weigher"
)

// Finding is one problem Check found in a config that parses and
// validates but cannot work as written.
type Finding struct {
	// Field is the config path at fault, e.g. "limits[2]" or
	// "upstreams[0].api_key_env".
	Field string
	// Message says what goes wrong and what to change.
	Message string
	// Fatal: llmguard refuses to start (and `llmguard validate` fails).
	// Otherwise the finding is a warning: logged at start and on reload,
	// printed by `llmguard validate`.
	Fatal bool
}

// String is "<field>: <message>".
func (f Finding) String() string { return f.Field + ": " + f.Message }

// Lookup reads an environment variable (os.LookupEnv's shape).
type Lookup func(name string) (string, bool)

// Check finds what in a valid config cannot work, in config order:
//
//   - an upstream that would get no credential for virtual-key callers:
//     api_key_env empty, or naming a variable unset or empty in env (fatal;
//     an upstream with no_key: true, or a config whose every caller brings
//     its own key — identity.pass_through and no keys — needs none). env
//     nil skips the environment (a check on a machine without the secrets)
//     but not an empty api_key_env;
//   - an admin_token_env naming a variable unset or empty in env (fatal,
//     as for api_key_env: /admin/* would answer loopback callers without
//     the token the operator meant to require; env nil skips it);
//   - a limit whose capacity is below some model's default request cost (a
//     minimal request's input plus the model's default output reservation,
//     priced in the standard tier for usd), so that every call to it that
//     sets no maximum output is refused (checkDefaultCosts);
//   - a plans, tenants or users matcher entry that no key (nor the
//     pass-through identity) has, a models glob that fits no priced
//     model, and a paths glob that matches no path a rule sees
//     (unknownPathGlob);
//   - a key's plan that no limit's plans matcher names while some limit
//     has one, so that the key's calls escape every plan-scoped limit
//     (checkKeyPlans);
//   - two regions of region_exchange given one Redis (a peer's URL the
//     store's, or another peer's), where the exchange's plan stays at
//     every region's floor (checkRegionPeers);
//   - a limit with shards on a store other than redis_cluster, where
//     shards spread no load and only add under-admission;
//   - a lease on a limit of a memory store, which has no effect;
//   - an openai or anthropic upstream without a path_prefix whose
//     base_url ends in /v1, to which callers' /v1 paths would be appended
//     (checkBaseURLs);
//   - a model priced a hundredth or less, or a hundred times or more, of
//     the embedded table's price for its name: a price per 1K tokens or
//     per token where USD per million is meant (checkPriceScale);
//   - an access_log output other than stderr without enabled: true, so
//     that nothing is written there (checkAccessLogOutput);
//   - a ledger.file that exists and is not a regular file (checkLedgerFile).
//
// pol and w are the config's compiled policy and weigher.
func Check(cfg *config.Config, pol *policy.Policy, w *weigher.Weigher, env Lookup) []Finding {
	var out []Finding
	out = append(out, checkUpstreamKeys(cfg, env)...)
	out = append(out, checkAdminToken(cfg, env)...)
	out = append(out, checkDefaultCosts(cfg, pol, w)...)
	out = append(out, checkMatchers(cfg, pol)...)
	out = append(out, checkKeyPlans(cfg)...)
	out = append(out, checkRegionPeers(cfg)...)
	out = append(out, checkShards(cfg)...)
	out = append(out, checkLeases(cfg)...)
	out = append(out, checkBaseURLs(cfg)...)
	out = append(out, checkPriceScale(cfg)...)
	out = append(out, checkTLSFiles(cfg, time.Now())...)
	out = append(out, checkAccessLogOutput(cfg)...)
	out = append(out, checkLedgerFile(cfg)...)
	return out
}

// checkLedgerFile refuses a ledger.file that exists and is not a regular
// file: a directory, a device, or a FIFO, whose open would wait for a
// reader forever (`serve` hung before it listened, adv48; the ledger now
// refuses it when it opens, and `validate` says so beforehand).
func checkLedgerFile(cfg *config.Config) []Finding {
	f := cfg.Ledger.File
	if f == "" {
		return nil
	}
	if st, err := os.Stat(f); err == nil && !st.Mode().IsRegular() {
		return []Finding{{Field: "ledger.file", Fatal: true,
			Message: fmt.Sprintf("%s exists and is not a regular file (%s): the ledger is written to a regular file", f, st.Mode().Type())}}
	}
	return nil
}

// checkAccessLogOutput refuses an access log file that `serve` could not
// open: its directory missing or not a directory, or the path an existing
// directory, FIFO or device rather than a regular file. An output other
// than the default stderr written without enabled: true is a warning: the
// log is off (its default), so nothing is written there (trial7: an
// access_log section of only output validated OK and logged nothing).
func checkAccessLogOutput(cfg *config.Config) []Finding {
	al := cfg.AccessLog
	if !al.Enabled && al.Output != "" && al.Output != "stderr" {
		return []Finding{{Field: "access_log", Message: fmt.Sprintf("output is %s but enabled is not true, so no access log is written: add enabled: true", al.Output)}}
	}
	if !al.Enabled || al.Output == "" || al.Output == "stderr" || al.Output == "stdout" {
		return nil
	}
	bad := func(msg string) []Finding {
		return []Finding{{Field: "access_log.output", Fatal: true, Message: msg}}
	}
	dir := filepath.Dir(al.Output)
	if st, err := os.Stat(dir); err != nil {
		return bad(fmt.Sprintf("the directory of %s cannot be used: %v", al.Output, err))
	} else if !st.IsDir() {
		return bad(fmt.Sprintf("%s is not a directory", dir))
	}
	if st, err := os.Stat(al.Output); err == nil && !st.Mode().IsRegular() {
		return bad(fmt.Sprintf("%s exists and is not a regular file (%s)", al.Output, st.Mode().Type()))
	}
	return nil
}

// tlsExpiryWarning is how close to its NotAfter a served certificate is
// warned of at start, on reload and by `llmguard validate`.
const tlsExpiryWarning = 14 * 24 * time.Hour

// checkTLSFiles refuses a tls or admin_tls section whose files do not hold
// a usable pair (the listener could not start), and warns of a certificate
// that expires within tlsExpiryWarning of now or has expired.
func checkTLSFiles(cfg *config.Config, now time.Time) []Finding {
	var out []Finding
	for _, l := range []struct {
		field string
		t     *config.TLS
	}{{"tls", cfg.TLS}, {"admin_tls", cfg.AdminTLS}} {
		if l.t == nil {
			continue
		}
		c, err := loadPair(l.t)
		switch {
		case err != nil:
			out = append(out, Finding{Field: l.field, Fatal: true, Message: "the certificate and key do not load: " + err.Error()})
		case now.After(c.Leaf.NotAfter):
			out = append(out, Finding{Field: l.field + ".cert_file", Message: fmt.Sprintf("the certificate expired at %s: clients that verify it refuse to connect", c.Leaf.NotAfter.UTC().Format(time.RFC3339))})
		case c.Leaf.NotAfter.Sub(now) < tlsExpiryWarning:
			out = append(out, Finding{Field: l.field + ".cert_file", Message: fmt.Sprintf("the certificate expires at %s, in less than %d days: renew it (the file is reloaded when it changes)", c.Leaf.NotAfter.UTC().Format(time.RFC3339), int(tlsExpiryWarning/(24*time.Hour)))})
		}
	}
	return out
}

// checkShards warns of every sharded limit when the store is not a Redis
// Cluster: one Redis runs every script on one thread and the memory store
// takes in-process, so shards save nothing there, while a request may
// still be denied with units left in the shards it could not use.
func checkShards(cfg *config.Config) []Finding {
	if cfg.Store.Kind() == spec.BackendRedisCluster {
		return nil
	}
	var out []Finding
	for i, l := range cfg.Limits {
		if l.Shards > 1 {
			out = append(out, Finding{Field: fmt.Sprintf("limits[%d].shards", i), Message: fmt.Sprintf(
				"limit %s has %d shards on the %s store: shards spread a hot bucket over a Redis Cluster's masters; "+
					"here they spread no load and only add under-admission (README, \"Sharded limits\"): remove shards, or use redis_cluster",
				l.Name, l.Shards, cfg.Store.Backend)})
		}
	}
	return out
}

// Fatal returns the fatal findings of fs.
func Fatal(fs []Finding) []Finding {
	return slices.DeleteFunc(slices.Clone(fs), func(f Finding) bool { return !f.Fatal })
}

func checkUpstreamKeys(cfg *config.Config, env Lookup) []Finding {
	if cfg.Identity.PassThrough && len(cfg.Keys) == 0 {
		return nil // every caller's own key goes upstream
	}
	var out []Finding
	for i, u := range cfg.Upstreams {
		f := fmt.Sprintf("upstreams[%d]", i)
		switch {
		case u.NoKey:
		case u.APIKeyEnv == "":
			out = append(out, Finding{Field: f + ".api_key_env", Fatal: true, Message: fmt.Sprintf(
				"upstream %q has no api_key_env, so callers with virtual keys would reach it with no credential: "+
					"name the environment variable holding its key, or set no_key: true if it needs none", u.Name)})
		case env != nil:
			if v, ok := env(u.APIKeyEnv); !ok || v == "" {
				out = append(out, Finding{Field: f + ".api_key_env", Fatal: true, Message: fmt.Sprintf(
					"%s is not set (or empty), so upstream %q would get no credential: set it, or set no_key: true "+
						"(without api_key_env) if the upstream needs no key", u.APIKeyEnv, u.Name)})
			}
		}
	}
	return out
}

// checkAdminToken refuses an admin_token_env whose variable is unset or
// empty in env: /admin/* would then answer every loopback caller without
// a token (what a config without admin_token_env asks for), where the
// operator meant to require one. env nil skips the check.
func checkAdminToken(cfg *config.Config, env Lookup) []Finding {
	if cfg.AdminTokenEnv == "" || env == nil {
		return nil
	}
	if v, ok := env(cfg.AdminTokenEnv); ok && v != "" {
		return nil
	}
	return []Finding{{Field: "admin_token_env", Fatal: true, Message: fmt.Sprintf(
		"%s is not set (or empty), so /admin/* would answer loopback callers without a token: "+
			"set it to the admin token, or remove admin_token_env to let loopback callers in without one", cfg.AdminTokenEnv)}}
}

// ruleNamed is the compiled rule of a limit name (names are unique).
func ruleNamed(pol *policy.Policy, name string) *policy.Rule {
	rules := pol.Rules()
	for i := range rules {
		if rules[i].Name == name {
			return &rules[i]
		}
	}
	return nil
}

// passThroughID is the shape of a pass-through caller's user id: the first
// 16 hex digits of its key's SHA-256.
var passThroughID = regexp.MustCompile(`^[0-9a-f]{16}$`)

func checkMatchers(cfg *config.Config, pol *policy.Policy) []Finding {
	plans, tenants, users := map[string]bool{}, map[string]bool{}, map[string]bool{}
	for _, pr := range pol.Principals() {
		plans[pr.Plan], tenants[pr.Tenant], users[pr.User] = true, true, true
	}
	pt := cfg.Identity.PassThrough
	if pt {
		plans[cfg.Identity.Plan], tenants[cfg.Identity.Tenant] = true, true
	}
	priced := pol.PricedModels()
	slices.Sort(priced)
	var out []Finding
	for i, l := range cfg.Limits {
		f := fmt.Sprintf("limits[%d]", i)
		for _, m := range []struct {
			field  string
			values []string
			known  map[string]bool
			what   string
		}{{"plans", l.Plans, plans, "plan"}, {"tenants", l.Tenants, tenants, "tenant"}, {"users", l.Users, users, "user"}} {
			for j, v := range m.values {
				// The key store's keys are not known from the file: any
				// value may be theirs.
				if m.known[v] || (pt && m.field == "users" && passThroughID.MatchString(v)) || cfg.KeyStore.Enabled {
					continue
				}
				out = append(out, Finding{Field: fmt.Sprintf("%s.%s[%d]", f, m.field, j), Message: fmt.Sprintf(
					"no key has %s %q, so this entry matches nobody (%ss in use: %s)", m.what, v, m.what, known(m.known))})
			}
		}
		for j, g := range l.Models {
			if slices.ContainsFunc(priced, func(name string) bool { return policy.MatchModel(g, name) }) {
				continue
			}
			msg := fmt.Sprintf("%q fits no priced model (in models:, prices_file or the embedded table)", g)
			if near := nearestModel(g, priced); near != "" {
				msg += fmt.Sprintf(" (did you mean %s?)", near)
			}
			if u, _ := spec.ParseUnit(l.Unit); u == spec.UnitUSD && cfg.DefaultPrice == nil {
				msg += ": this usd limit refuses every request it fits with model_not_priced; price those models or alias them"
			} else {
				msg += "; if it is meant for models without prices, ignore this"
			}
			out = append(out, Finding{Field: fmt.Sprintf("%s.models[%d]", f, j), Message: msg})
		}
		for j, g := range l.Paths {
			if msg := unknownPathGlob(g); msg != "" {
				out = append(out, Finding{Field: fmt.Sprintf("%s.paths[%d]", f, j), Message: msg})
			}
		}
	}
	return out
}

// nearestModel returns the priced model name a models entry without glob
// characters most likely misspells ("gpt4o", "claude-sonet-4-5"): the
// first in priced (sorted) at the least edit distance, at most 2, compared
// in lower case; "" when none is that near, the entry is a glob or is longer
// than suggest.MaxLen.
func nearestModel(g string, priced []string) string {
	if strings.ContainsAny(g, "*?[") || len(g) > suggest.MaxLen {
		return ""
	}
	g = strings.ToLower(g)
	best, bestD := "", 3
	for _, name := range priced {
		if d := suggest.Distance(g, strings.ToLower(name)); d < bestD {
			best, bestD = name, d
		}
	}
	return best
}

// checkKeyPlans warns of each plan that config keys have but no limit's
// plans matcher names, once some limit has a plans matcher: the keys of
// that plan (a typo, "Pro" for "pro", or a plan added to keys before its
// limits) are held only by the limits without one, and a config whose
// every limit names plans leaves them unlimited. One finding per plan, at
// its first key. The key store's keys are not judged: their plans are not
// in the file.
func checkKeyPlans(cfg *config.Config) []Finding {
	named := map[string]bool{}
	free := 0 // limits without a plans matcher (they hold every plan)
	for _, l := range cfg.Limits {
		for _, p := range l.Plans {
			named[p] = true
		}
		if len(l.Plans) == 0 && !l.Shadow {
			free++
		}
	}
	if len(named) == 0 {
		return nil
	}
	held := "no limit at all: its calls are unlimited"
	if free > 0 {
		held = fmt.Sprintf("only the %d limit(s) without a plans matcher", free)
	}
	var out []Finding
	seen := map[string]bool{}
	for i, k := range cfg.Keys {
		if k.Plan == "" || named[k.Plan] || seen[k.Plan] {
			continue
		}
		seen[k.Plan] = true
		msg := fmt.Sprintf("no limit names plan %q in its plans (plans limits name: %s), so keys of this plan are held by %s",
			k.Plan, known(named), held)
		if guess := suggest.Closest(k.Plan, slices.Sorted(maps.Keys(named))); guess != "" {
			msg += fmt.Sprintf(" (a limit names %s: is one of the two misspelt?)", guess)
		}
		out = append(out, Finding{Field: fmt.Sprintf("keys[%d].plan", i), Message: msg})
	}
	return out
}

// checkRegionPeers warns of regions of region_exchange given one Redis:
// a peer whose URL names the same server and database as store.redis_url
// (this region's own, backend redis) or as another peer. The exchange then
// reads two regions' records and demand from one Redis: no
// over-admission, but the regions may be held at their floors (min_share)
// for good (the trial's peer URL, copied from the other region's config,
// named its own Redis; both regions sat at 0.05 of the limit). URLs that
// do not parse are validation's to report.
func checkRegionPeers(cfg *config.Config) []Finding {
	x := cfg.RegionExchange
	if x == nil || cfg.Region == "" {
		return nil
	}
	where := func(u string) (string, bool) {
		o, err := redis.ParseURL(u)
		if err != nil {
			return "", false
		}
		return fmt.Sprintf("%s, db %d", o.Addr, o.DB), true
	}
	owner := map[string]string{} // Redis -> the first region found there
	field := map[string]string{}
	if cfg.Store.Kind() == spec.BackendRedis {
		if at, ok := where(cfg.Store.RedisURL); ok {
			owner[at], field[at] = cfg.Region, "store.redis_url"
		}
	}
	var out []Finding
	for _, r := range slices.Sorted(maps.Keys(x.Peers)) {
		at, ok := where(x.Peers[r])
		if !ok {
			continue
		}
		if other, taken := owner[at]; taken {
			out = append(out, Finding{Field: "region_exchange.peers." + r, Message: fmt.Sprintf(
				"region %s is given the Redis of region %s (%s, as %s): the exchange would read both regions' records and demand "+
					"from one Redis, and the regions may be held at their floors (min_share) for good; give each region its own Redis",
				r, other, at, field[at])})
			continue
		}
		owner[at], field[at] = r, "region_exchange.peers."+r
	}
	return out
}

// weighedPaths are the endpoints llmguard recognises by kind, as their
// APIs spell them (weigher.KindPaths): a request of one of these kinds is
// matched against rules' paths with this spelling, whatever its own.
var weighedPaths = weigher.KindPaths()

// unknownPathGlob says why a limit's paths glob g (valid path.Match
// syntax) matches no path a rule is matched against (proxy's rulePath: a
// recognised endpoint's own spelling, weighedPaths, else the canonical
// path: lowercase, from '/', no trailing or repeated '/'), or "" when it
// may match one:
//   - a glob that cannot match a canonical path;
//   - another spelling of a recognised endpoint (/chat/completions,
//     /openai/deployments/*/chat/completions), which its requests are not
//     matched as;
//   - a glob that matches no recognised endpoint and is a letter or two off
//     one (internal/suggest), as /v1/chat/completion, unless it extends one
//     (/v1/messages/batches is an endpoint of its own).
//
// Any other glob may name an unmetered endpoint or another API's path
// (/v1/audio/*, /api/chat), which llmguard forwards too: no warning.
func unknownPathGlob(g string) string {
	for _, p := range weighedPaths {
		if ok, _ := path.Match(g, p); ok {
			return ""
		}
	}
	if strings.ContainsAny(g, "[\\") {
		return "" // a class or an escape: not judged
	}
	near := ""
	if s := suggest.Closest(g, weighedPaths); s != "" && !strings.HasPrefix(g, s+"/") {
		near = " (did you mean " + s + "?)"
	}
	sample := strings.NewReplacer("*", "x", "?", "x").Replace(g) // one path the glob matches
	if !strings.HasPrefix(g, "/") || weigher.CanonicalPath(sample) != sample {
		return fmt.Sprintf("%q matches no request: rules' paths are matched against the path lowercase, "+
			"starting with /, without a trailing or repeated /%s", g, near)
	}
	if k := weigher.Classify("POST", sample); k.Path() != "" {
		return fmt.Sprintf("%q matches no request: a request to it is the %s endpoint, which rules' paths see as %s "+
			"whatever its spelling (README, \"Which endpoints are weighed\"): use %s", g, k, k.Path(), k.Path())
	}
	if near != "" {
		return fmt.Sprintf("%q matches no endpoint llmguard knows%s", g, near)
	}
	return ""
}

// known lists a set's values, sorted and bounded, for a message.
func known(set map[string]bool) string {
	vals := slices.Sorted(maps.Keys(set))
	if i := slices.Index(vals, ""); i >= 0 {
		// A key without the field (no plan) is not a value in use.
		vals = slices.Delete(vals, i, i+1)
	}
	if len(vals) > 10 {
		vals = append(vals[:10], fmt.Sprintf("… %d more", len(vals)-10))
	}
	return cmp.Or(strings.Join(vals, ", "), "none")
}

// CheckConfig compiles cfg as New does and returns Check's findings, for
// `llmguard validate`. Errors: the config does not compile (*config.Error
// for a limit Compile refuses, or a model the weigher cannot count).
func CheckConfig(cfg *config.Config, env Lookup) ([]Finding, error) {
	pol, w, err := compile(cfg)
	if err != nil {
		return nil, err
	}
	return Check(cfg, pol, w, env), nil
}
