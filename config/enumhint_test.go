package config

import (
	"errors"
	"strings"
	"testing"

	"github.com/llmguard/llmguard/spec"
)

// A value outside an enum is reported with the value it most likely
// stands for, as a misspelt key is (trial9: `on_limt` got "did you mean
// on_limit?" but `scope: users` only the list); a value near none of
// them, or empty, gets no guess.
func TestEnumValueSuggestsTheNearest(t *testing.T) {
	const upstream = "upstreams:\n  - {name: o, flavor: openai, base_url: \"http://127.0.0.1:1\"}\n"
	const limit = "limits:\n  - {name: a, scope: user, unit: tokens, rate: 1, per: 1s, burst: 3"
	for _, tc := range []struct {
		name, yaml string
		field, got string // the problem's field and the value written
		guess      string // "": no "did you mean"
	}{
		{"scope", strings.Replace(upstream+limit+"}\n", "scope: user", "scope: users", 1), "limits[0].scope", "users", "user"},
		{"unit", strings.Replace(upstream+limit+"}\n", "unit: tokens", "unit: token", 1), "limits[0].unit", "token", "tokens"},
		{"algorithm", upstream + limit + ", algorithm: sliding-window}\n", "limits[0].algorithm", "sliding-window", "sliding_window"},
		{"backend", upstream + limit + "}\nstore: {backend: reddis}\n", "store.backend", "reddis", "redis"},
		// trial23: a value one letter off the longer of two values that begin
		// alike was offered the shorter, and the shorter in capitals the longer
		{"backend one letter off redis_cluster", upstream + limit + "}\nstore: {backend: redis_clustr}\n", "store.backend", "redis_clustr", "redis_cluster"},
		{"backend in capitals", upstream + limit + "}\nstore: {backend: Redis}\n", "store.backend", "Redis", "redis"},
		{"on_limit", upstream + limit + ", on_limit: wiat}\n", "limits[0].on_limit", "wiat", "wait"},
		{"on_failure", upstream + limit + ", on_failure: clsed}\n", "limits[0].on_failure", "clsed", "closed"},
		{"store on_failure", upstream + limit + "}\nstore: {on_failure: Open}\n", "store.on_failure", "Open", "open"},
		{"flavor", strings.Replace(upstream+limit+"}\n", "flavor: openai", "flavor: opena1", 1), "upstreams[0].flavor", "opena1", "openai"},
		{"chat_output_field", strings.Replace(upstream+limit+"}\n", "base_url:", "chat_output_field: max_token, base_url:", 1), "upstreams[0].chat_output_field", "max_token", "max_tokens"},
		{"encoding", upstream + limit + "}\nmodels:\n  m: {input_usd_per_mtok: 1, output_usd_per_mtok: 2, encoding: o200k}\n", "models.m.encoding", "o200k", "o200k_base"},
		{"period", upstream + "limits:\n  - {name: a, scope: user, unit: tokens, quota: 10, period: mnth}\n", "limits[0].period", "mnth", "month"},
		{"service tier", upstream + limit + "}\ndefault_service_tier: flx\n", "default_service_tier", "flx", "flex"},
		{"access_log", upstream + limit + "}\naccess_log: {format: jsn}\n", "access_log.format", "jsn", "json"},
		{"tracing", upstream + limit + "}\ntracing: {protocol: grcp}\n", "tracing.protocol", "grcp", "grpc"},
		{"webhook", upstream + limit + "}\nalerts: {webhook: {url: \"https://hooks.example.com/x\", format: slak, thresholds: [0.5]}}\n", "alerts.webhook.format", "slak", "slack"},
		// trial27: the words around the value meant
		{"on_failure with words", upstream + limit + ", on_failure: fail-open}\n", "limits[0].on_failure", "fail-open", "open"},
		{"store on_failure with words", upstream + limit + "}\nstore: {on_failure: fail_closed}\n", "store.on_failure", "fail_closed", "closed"},
		{"far from all", strings.Replace(upstream+limit+"}\n", "scope: user", "scope: planet", 1), "limits[0].scope", "planet", ""},
		{"empty", strings.Replace(upstream+limit+"}\n", "scope: user", `scope: ""`, 1), "limits[0].scope", "", ""},
	} {
		_, err := Parse([]byte(tc.yaml))
		var ce *Error
		if !errors.As(err, &ce) {
			t.Errorf("%s: err = %v, want *Error", tc.name, err)
			continue
		}
		var problem string
		for _, p := range ce.Problems {
			if strings.Contains(p, tc.field+": ") && strings.Contains(p, `(got "`+tc.got+`")`) {
				problem = p
			}
		}
		want := `(got "` + tc.got + `")`
		if tc.guess != "" {
			want += " (did you mean " + tc.guess + "?)"
		}
		switch {
		case problem == "":
			t.Errorf("%s: no problem of %s got %q among:\n%s", tc.name, tc.field, tc.got, strings.Join(ce.Problems, "\n"))
		case !strings.HasSuffix(problem, want):
			t.Errorf("%s: problem %q, want it to end %q", tc.name, problem, want)
		}
	}
}

// An empty value is "required" territory: no guess from it (every known
// name has "" as a prefix).
func TestDidYouMeanEmpty(t *testing.T) {
	if got := didYouMean("", []string{"user", "tenant"}); got != "" {
		t.Errorf(`didYouMean("") = %q, want ""`, got)
	}
	if got := didYouMean("users", []string{"tenant", "user"}); got != " (did you mean user?)" {
		t.Errorf(`didYouMean("users") = %q`, got)
	}
}

// TestEnumProblemListsItsTable: the enums trial23 tried each list their
// values from their one table in spec, in one form, and offer the near
// miss (before, four spelt their values out in the message, "must be open
// or closed", which a value added to the table would have left behind).
func TestEnumProblemListsItsTable(t *testing.T) {
	const upstream = "upstreams:\n  - {name: o, flavor: openai, base_url: \"http://127.0.0.1:1\"}\n"
	const limit = "limits:\n  - {name: a, scope: tenant, unit: tokens, rate: 1, per: 1s, burst: 3"
	for _, tc := range []struct {
		yaml, field, got, guess string
		table                   []string
	}{
		{upstream + limit + "}\nstore: {backend: redis_clustr}\n", "store.backend", "redis_clustr", "redis_cluster", spec.BackendNames()},
		{upstream + limit + ", on_failure: close}\n", "limits[0].on_failure", "close", "closed", spec.FailureModeNames()},
		{upstream + limit + "}\nstore: {on_failure: opne}\n", "store.on_failure", "opne", "open", spec.FailureModeNames()},
		{upstream + "limits:\n  - {name: a, scope: tenant, unit: tokens, quota: 10, period: daily}\n", "limits[0].period", "daily", "day", spec.PeriodNames()},
		{upstream + limit + "}\ndefault_service_tier: priorty\n", "default_service_tier", "priorty", "priority", spec.ServiceTierNames()},
		{upstream + limit + "}\naccess_log: {enabled: true, format: txt}\n", "access_log.format", "txt", "text", spec.LogFormatNames()},
		{upstream + limit + "}\ntracing: {enabled: true, endpoint: \"127.0.0.1:4317\", protocol: https}\n", "tracing.protocol", "https", "http", spec.TraceProtocolNames()},
		{upstream + limit + "}\nalerts: {webhook: {url: \"https://hooks.example.com/x\", format: JSON, thresholds: [0.5]}}\n", "alerts.webhook.format", "JSON", "json", spec.AlertFormatNames()},
		{upstream + limit + ", algorithm: fixed-window}\n", "limits[0].algorithm", "fixed-window", "fixed_window", spec.AlgorithmNames()},
		{upstream + limit + ", on_limit: Wait}\n", "limits[0].on_limit", "Wait", "wait", spec.OnLimitNames()},
		{strings.Replace(upstream+limit+"}\n", "base_url:", "chat_output_field: max_completion_token, base_url:", 1), "upstreams[0].chat_output_field", "max_completion_token", "max_completion_tokens", spec.ChatOutputFieldNames()},
	} {
		_, err := Parse([]byte(tc.yaml))
		var ce *Error
		if !errors.As(err, &ce) {
			t.Errorf("%s: err = %v, want *Error", tc.field, err)
			continue
		}
		want := tc.field + ": must be one of " + strings.Join(tc.table, ", ") + ` (got "` + tc.got + `") (did you mean ` + tc.guess + "?)"
		found := false
		for _, p := range ce.Problems {
			found = found || strings.HasSuffix(p, want)
		}
		if !found {
			t.Errorf("%s: no problem ending %q among:\n%s", tc.field, want, strings.Join(ce.Problems, "\n"))
		}
	}
}
