package lua

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/llmguard/llmguard/internal/redistest"
)

// unitsProbe is core.lua with an entry that reads ARGV[1] by unitsOf and
// each later ARGV as the scripts read a decimal unit before (text + 0),
// and replies, per later ARGV, the two numbers as '%.17g' texts (equal
// texts: the same double, but for the sign of a zero, which no int64 has)
// and last how many numbers unitsOf gave.
var unitsProbe = redis.NewScript(core + `
floor = math.floor
local u = unitsOf(ARGV[1])
local out = {}
for i = 2, #ARGV do
  out[#out + 1] = string.format('%.17g', u[i - 1])
  out[#out + 1] = string.format('%.17g', ARGV[i] + 0)
end
out[#out + 1] = tostring(#u)
return out
`)

// packUnits is bucket's packing of units (8 bytes each, the double
// float64(units) little-endian), written again here: what core.lua's
// unitsOf reads.
func packUnits(units []int64) string {
	b := make([]byte, 0, 8*len(units))
	for _, u := range units {
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(float64(u)))
	}
	return string(b)
}

// checkUnits runs unitsProbe on units through c and reports every unit
// whose unpacked double is not the one its decimal text gives.
func checkUnits(t testing.TB, c *redis.Client, units []int64, where string) {
	t.Helper()
	args := make([]any, 1, 1+len(units))
	args[0] = packUnits(units)
	for _, u := range units {
		args = append(args, strconv.FormatInt(u, 10))
	}
	got, err := unitsProbe.Run(context.Background(), c, nil, args...).StringSlice()
	if err != nil {
		t.Fatalf("%s: %v", where, err)
	}
	if len(got) != 2*len(units)+1 || got[len(got)-1] != strconv.Itoa(len(units)) {
		t.Fatalf("%s: %d units gave the reply %q", where, len(units), got)
	}
	for i, u := range units {
		if got[2*i] != got[2*i+1] {
			t.Errorf("%s: unit %d (%d): unpacked %s, its text %s", where, i, u, got[2*i], got[2*i+1])
		}
	}
}

// edgeUnits are the int64s where a double's rounding shows: around 2^53
// (the first odd integer a double cannot hold), the int64 range's ends,
// and small ones.
var edgeUnits = []int64{0, 1, -1, 2, 9, 10, 100, -100, 1000003, -7654321, 1<<53 - 1, 1 << 53, 1<<53 + 1, 1<<53 + 3,
	-(1<<53 + 1), 1<<62 + 511, 1<<62 + 512, 1<<62 + 513, math.MaxInt64, math.MinInt64, math.MinInt64 + 1, 1e18 + 1}

// randomUnits returns n int64s of every magnitude (a random bit length,
// either sign).
func randomUnits(r *rand.Rand, n int) []int64 {
	units := make([]int64, n)
	for i := range units {
		u := int64(r.Uint64() >> r.IntN(64))
		if r.IntN(2) == 0 {
			u = -u
		}
		units[i] = u
	}
	return units
}

// TestUnitsOfMatchesText: core.lua's unitsOf gives, for packed int64s,
// the doubles their decimal texts gave the scripts ("text + 0"): on a
// real redis-server (struct.unpack, one call, and in chunks past
// unitsChunk numbers) and on miniredis (no struct: unitFromBytes).
func TestUnitsOfMatchesText(t *testing.T) {
	r := rand.New(rand.NewPCG(16, 5))
	cases := [][]int64{nil, {7}, edgeUnits, randomUnits(r, 64), randomUnits(r, unitsChunkForTest), randomUnits(r, 2*unitsChunkForTest+37)}
	run := func(t *testing.T, c *redis.Client) {
		for i, units := range cases {
			checkUnits(t, c, units, fmt.Sprintf("case %d (%d units)", i, len(units)))
		}
	}
	t.Run("miniredis", func(t *testing.T) {
		mr := miniredis.RunT(t)
		c := redis.NewClient(&redis.Options{Addr: mr.Addr()})
		defer c.Close()
		run(t, c)
	})
	t.Run("redis-server", func(t *testing.T) {
		run(t, redistest.Start(t).Client())
	})
}

// unitsChunkForTest is core.lua's unitsChunk: cases of more numbers take
// its chunked path.
const unitsChunkForTest = 256

// FuzzUnitsOf runs TestUnitsOfMatchesText's check on int64s made of the
// fuzzer's bytes (8 a unit, at most 600 units) on miniredis and a real
// redis-server:
//
//	go test -run XXX -fuzz '^FuzzUnitsOf$' -fuzztime 60s -fuzzminimizetime 1x ./lua/
func FuzzUnitsOf(f *testing.F) {
	f.Add(packUnits(edgeUnits))
	f.Add(packUnits([]int64{-100, 3}))
	mr := miniredis.RunT(f)
	mc := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer mc.Close()
	rc := redistest.Start(f).Client()
	f.Fuzz(func(t *testing.T, data string) {
		n := min(len(data)/8, 600)
		units := make([]int64, n)
		for i := range units {
			units[i] = int64(binary.LittleEndian.Uint64([]byte(data[8*i : 8*i+8])))
		}
		checkUnits(t, mc, units, "miniredis")
		checkUnits(t, rc, units, "redis-server")
	})
}
