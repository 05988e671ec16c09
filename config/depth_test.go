package config

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const minimalUpstream = `
upstreams:
  - {name: openai, flavor: openai, base_url: "https://api.openai.com"}
`

func TestMaxJSONDepth(t *testing.T) {
	c, err := Parse([]byte(minimalUpstream))
	if err != nil {
		t.Fatal(err)
	}
	if c.MaxJSONDepth != 128 {
		t.Errorf("default max_json_depth %d, want 128", c.MaxJSONDepth)
	}
	if c, err := Parse([]byte("max_json_depth: 40\n" + minimalUpstream)); err != nil || c.MaxJSONDepth != 40 {
		t.Errorf("max_json_depth 40: %v, %v", c, err)
	}
	for _, bad := range []string{"-1", "10001"} {
		_, err := Parse([]byte("max_json_depth: " + bad + "\n" + minimalUpstream))
		var ce *Error
		if !errors.As(err, &ce) || !strings.Contains(err.Error(), "max_json_depth: must be between 1 and 10000") {
			t.Errorf("max_json_depth %s: %v", bad, err)
		}
	}
}

// TestYAMLFlowDepth: a config of deeply nested flow collections is refused
// by a flat scan before goccy/go-yaml, whose parse of them takes time that
// grows faster than the input (100,000 levels: about 30 s), sees it.
func TestYAMLFlowDepth(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		line       int // 0: accepted
	}{
		{name: "ordinary flow mappings", yaml: minimalUpstream + "limits:\n  - {name: rpm, scope: user, unit: requests, rate: 60, per: 1m, match: {models: [gpt-4o, \"a]]]]\"]}}\n"},
		{name: "brackets in quotes and comments do not count", yaml: "# [[[[[[[[\n" + minimalUpstream + "keys:\n  - {key_sha256: '" + strings.Repeat("[", 300) + "', user: bob}\n"},
		{name: "deep sequence", yaml: minimalUpstream + "keys: " + strings.Repeat("[", 1_000_000), line: 4},
		{name: "deep mapping", yaml: "\n\nkeys: " + strings.Repeat("{a: ", 200), line: 3},
		{name: "deep across lines", yaml: "keys:\n" + strings.Repeat("  [\n", 129), line: 130},
	} {
		err := checkFlowDepth([]byte(tc.yaml), maxYAMLFlowDepth)
		if tc.line == 0 {
			if err != nil {
				t.Errorf("%s: %v", tc.name, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), "line "+itoa(tc.line)+":") {
			t.Errorf("%s: %v, want an error at line %d", tc.name, err, tc.line)
		}
		// Parse refuses it too, quickly and with the field-less problem.
		if _, err := Parse([]byte(tc.yaml)); err == nil || !strings.Contains(err.Error(), "nested deeper than 128") {
			t.Errorf("%s: Parse: %v", tc.name, err)
		}
	}
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var d []byte
	for ; n > 0; n /= 10 {
		d = append([]byte{byte('0' + n%10)}, d...)
	}
	return string(d)
}

// TestPricesFileDepth: a price file is scanned flat before encoding/json
// reads it; a deep one is refused with the reason.
func TestPricesFileDepth(t *testing.T) {
	if _, err := ParsePrices([]byte(`{"m":{"input_cost_per_token":1e-6,"x":` + strings.Repeat("[", 200) + strings.Repeat("]", 200) + `}}`)); err == nil ||
		!strings.Contains(err.Error(), "prices: jsonscan: nested deeper than 128") {
		t.Errorf("deep price file: %v", err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "p.json"), []byte(strings.Repeat("[", 5<<20)), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "c.yaml"), []byte("prices_file: p.json\n"+minimalUpstream), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(filepath.Join(dir, "c.yaml")); err == nil || !strings.Contains(err.Error(), "prices_file: prices: jsonscan: nested deeper") {
		t.Errorf("Load with a bracket-flood price file: %v", err)
	}
}

func FuzzCheckFlowDepth(f *testing.F) {
	for _, s := range []string{minimalUpstream, "a: [b, {c: 'd]]'}]\n# [[[\n", "k: \"\\\"[\"\n", "x: [[[[", "'''[", "a: b#[[\n"} {
		f.Add(s, uint8(2))
	}
	f.Fuzz(func(t *testing.T, s string, limit uint8) {
		err := checkFlowDepth([]byte(s), int(limit))
		// A limit as long as the input is never exceeded, and a higher
		// limit never refuses what a lower one accepted.
		if checkFlowDepth([]byte(s), len(s)+1) != nil {
			t.Fatalf("%q refused with a limit over its length", s)
		}
		if err == nil && checkFlowDepth([]byte(s), int(limit)+1) != nil {
			t.Fatalf("%q: accepted at %d, refused at %d", s, limit, int(limit)+1)
		}
	})
}

// TestYAMLEntries: a config file of more than maxYAMLEntries entries is
// refused by the flat scan before the YAML parser sees it (adv48: 10,000,000
// one-line list items, 60 MB, under MaxFileBytes, took `validate` to 3.6 GB);
// a config of 10,000 keys in flow style passes the scan.
func TestYAMLEntries(t *testing.T) {
	var keys strings.Builder
	keys.WriteString(minimalUpstream + "keys:\n")
	for i := range 10_000 {
		fmt.Fprintf(&keys, "  - {key_sha256: %064x, user: user%d, tenant: t%d, plan: free}\n", i, i, i%100)
	}
	if err := scanYAML([]byte(keys.String()), configYAMLLimits); err != nil {
		t.Errorf("10,000 keys: %v", err)
	}
	for _, tc := range []struct {
		name, yaml string
		line       int
	}{
		{name: "block list", yaml: minimalUpstream + "x:\n" + strings.Repeat("  - 1\n", maxYAMLEntries), line: maxYAMLEntries},
		{name: "flow list on one line", yaml: minimalUpstream + "x: [" + strings.Repeat("1,", maxYAMLEntries) + "]\n", line: 4},
	} {
		_, err := Parse([]byte(tc.yaml))
		want := fmt.Sprintf("line %d: more than %d entries", tc.line, maxYAMLEntries)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: Parse: %v, want %q", tc.name, err, want)
		}
	}
	// Comments, blank lines and commas in quoted scalars are no entries.
	if err := scanYAML([]byte("# a\n\n   # b\nx: 'a,b,c'\ny: \"d,\ne\"\n"), yamlLimits{FlowDepth: math.MaxInt, Entries: 2}); err != nil {
		t.Errorf("two entries: %v", err)
	}
}

func FuzzScanYAMLEntries(f *testing.F) {
	for _, s := range []string{minimalUpstream, "a: [b, {c: 'd,,'}]\n# ,,,\n", "k: \"\\\",\"\n", "- 1\n- 2\n", "'''", "a: b#,,\n"} {
		f.Add(s, uint8(2))
	}
	f.Fuzz(func(t *testing.T, s string, limit uint8) {
		err := scanYAML([]byte(s), yamlLimits{FlowDepth: math.MaxInt, Entries: int(limit) + 1})
		// No more entries than bytes, and a higher limit never refuses
		// what a lower one accepted.
		if scanYAML([]byte(s), yamlLimits{FlowDepth: math.MaxInt, Entries: len(s) + 1}) != nil {
			t.Fatalf("%q refused with an entry limit over its length", s)
		}
		if err == nil && scanYAML([]byte(s), yamlLimits{FlowDepth: math.MaxInt, Entries: int(limit) + 2}) != nil {
			t.Fatalf("%q: accepted at %d entries, refused at %d", s, int(limit)+1, int(limit)+2)
		}
	})
}
