package lua

import (
	"strings"
	"testing"
)

// TestUnroll checks unroll's expansion on a small template: one copy per
// width, each "-- @each" block once per bucket with @i and @W replaced,
// and the table of the copies; and that the scripts built from
// takebatch.lua hold every runTokens and no placeholder.
func TestUnroll(t *testing.T) {
	src := "head\n-- @unroll\nlocal function f@W()\n  -- @each\n  local x@i = @i * @W\n  -- @end\n  return 0\nend\n-- @unroll end\ntail\n"
	got := unroll(src, "runTokens")
	want := "head\n" +
		"local function f1()\n  local x1 = 1 * 1\n  return 0\nend\n" +
		"local function f2()\n  local x1 = 1 * 2\n  local x2 = 2 * 2\n  return 0\nend\n" +
		"local function f3()\n  local x1 = 1 * 3\n  local x2 = 2 * 3\n  local x3 = 3 * 3\n  return 0\nend\n" +
		"local function f4()\n  local x1 = 1 * 4\n  local x2 = 2 * 4\n  local x3 = 3 * 4\n  local x4 = 4 * 4\n  return 0\nend\n" +
		"local runTokens = {runTokens1, runTokens2, runTokens3, runTokens4}\ntail\n"
	if got != want {
		t.Errorf("unroll:\n%s\nwant:\n%s", got, want)
	}
	for _, script := range []string{TakeBatch, Library} {
		for _, name := range []string{"local function runTokens1(", "local function runTokens4(", "local runTokens = {runTokens1, runTokens2, runTokens3, runTokens4}"} {
			if !strings.Contains(script, name) {
				t.Errorf("script lacks %q", name)
			}
		}
		if strings.Contains(script, "@i") || strings.Contains(script, "@W") || strings.Contains(script, "-- @each") {
			t.Error("script keeps an unroll placeholder")
		}
	}
	for _, bad := range []string{"no markers\n", "-- @unroll\n-- @each\nx\n-- @unroll end\n", "-- @unroll\n-- @end\n-- @unroll end\n"} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("unroll(%q) did not panic", bad)
				}
			}()
			unroll(bad, "runTokens")
		}()
	}
}
