package bucket_test

import (
	"context"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/llmguard/llmguard/lua"
)

// parseProbe is take.lua up to its entry (core.lua's functions, take.lua's
// own), then a probe of three of core.lua's parsers, run by miniredis's
// Lua: parse(ARGV[1]) next to the order parse had before a token bucket's
// pattern went first (quota, window counter, then token bucket); parse of
// encode(ARGV[2], 1234) (read back through encodedLevel) next to the old
// order's reading of the same text; and limitOf(ARGV[3]), or "error". Every
// number comes back as '%.17g' text (Redis would truncate a reply number).
var parseProbe = strings.SplitN(lua.Take, "-- @entry:", 2)[0] + `
local function oldParse(v)
  if not v then
    return nil
  end
  local used, window = string.match(v, '^q (%d+) (%d+)$')
  if used then
    return 'q', used + 0, window + 0
  end
  local prev, cur, start = string.match(v, '^w (%d+) (%d+) (%d+)$')
  if prev then
    return 'w', prev + 0, cur + 0, start + 0
  end
  local level, updated = string.match(v, '^(%S+) (%d+)$')
  level = level and tonumber(level)
  if level then
    return 't', level, updated + 0
  end
  return 'x'
end
local function text(kind, a, b, c)
  local out = {tostring(kind)}
  for _, x in ipairs({a or false, b or false, c or false}) do
    out[#out + 1] = x and string.format('%.17g', x) or '-'
  end
  return table.concat(out, ' ')
end
local reply = {text(parse(ARGV[1])), text(oldParse(ARGV[1]))}
local level = tonumber(ARGV[2])
if level and level == level and level > -1e300 and level < 1e300 then
  local v = encode(level, 1234)
  reply[3], reply[4] = text(parse(v)), text(oldParse(v))
else
  reply[3], reply[4] = '', ''
end
local ok, l = pcall(limitOf, ARGV[3])
if ok then
  reply[5] = text(l[6], l[1], l[2], l[3]) .. ' ' .. text('', l[4], l[5])
else
  reply[5] = 'error'
end
return reply
`

// limitPattern is limitOf's pattern, as a Go regexp.
var limitPattern = regexp.MustCompile(`^(-?[0-9]+) (-?[0-9]+) (-?[0-9]+) (-?[0-9]+) (-?[0-9]+)$`)

// FuzzLuaParse runs core.lua's parsers on arbitrary text (miniredis's Lua):
// parse, token bucket first, reads every value as the old order did; a
// value encode made reads back (from encodedLevel) as parsing its text
// does; limitOf reads a text of five integers as limitText writes them as
// their numbers and fails on any text not of five integers.
func FuzzLuaParse(f *testing.F) {
	mr := miniredis.RunT(f)
	c := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	f.Cleanup(func() { c.Close() })
	probe := redis.NewScript(parseProbe)
	for _, seed := range [][3]string{
		{"499.5 1773144000000000", "499.5", "500 3 60000000 0 0"},
		{"q 5 1773100800000000", "-3.25", "6 0 0 1773100800000000 1775692800000000"},
		{"w 1 2 1773144000000000", "1e-300", "10 0 60000000 -1 -2"},
		{"q 5", "0", "1 2 3 4"},
		{"-0 7", "-0", "1 2 3 4 5 6"},
		{"0x10 5", "0.1", "a 2 3 4 5"},
		{"inf 5", "123456789012345678", "-9223372036854775808 9223372036854775807 0 0 0"},
		{"w 1 2", "nan", "1  2 3 4 5"},
		{"5 1.5", "2", "1 2 3 4 -0"},
		{"5 x", "3", "1 2 3 4 0x5"},
		{"", "", ""},
	} {
		f.Add(seed[0], seed[1], seed[2])
	}
	f.Fuzz(func(t *testing.T, value, level, limit string) {
		got, err := probe.Run(context.Background(), c, nil, value, level, limit).StringSlice()
		if err != nil {
			t.Fatalf("probe(%q, %q, %q): %v", value, level, limit, err)
		}
		if got[0] != got[1] {
			t.Errorf("parse(%q) = %q, the old order %q", value, got[0], got[1])
		}
		if got[2] != got[3] {
			t.Errorf("parse(encode(%q)) = %q (remembered), parsing its text %q", level, got[2], got[3])
		}
		m := limitPattern.FindStringSubmatch(limit)
		if m == nil {
			if got[4] != "error" {
				t.Errorf("limitOf(%q) = %q, want an error", limit, got[4])
			}
			return
		}
		for _, s := range m[1:] {
			if n, err := strconv.ParseInt(s, 10, 64); err != nil || strconv.FormatInt(n, 10) != s {
				// Not as limitText writes it (a leading zero, "-0", past
				// int64): only not crashing is asked. (miniredis's Lua reads
				// "010" as octal, Redis's as 10.)
				return
			}
		}
		fields := strings.Fields(got[4])
		if len(fields) != 7 {
			t.Fatalf("limitOf(%q) = %q", limit, got[4])
		}
		nums := fields[1:6] // then "-", the probe's empty third number
		for i, s := range m[1:] {
			want, _ := strconv.ParseFloat(s, 64)
			g, err := strconv.ParseFloat(nums[i], 64)
			if err != nil || g != want {
				t.Errorf("limitOf(%q): number %d is %q, want %v", limit, i, nums[i], want)
			}
		}
		rate, end := m[2], m[5]
		kind := "t"
		switch {
		case !strings.HasPrefix(end, "-") && strings.Trim(end, "0") != "":
			kind = "q"
		case strings.HasPrefix(end, "-") && strings.Trim(end[1:], "0") != "":
			kind = "w"
		case strings.Trim(strings.TrimPrefix(rate, "-"), "0") == "":
			kind = "c"
		}
		if fields[0] != kind {
			t.Errorf("limitOf(%q): kind %q, want %q", limit, fields[0], kind)
		}
	})
}
