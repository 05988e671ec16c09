package bucket

// miniredisStride thins the golden and layout tables on miniredis: every
// case is replayed on a real redis-server (the Lua 5.1 that production
// runs, by FCALL), and every miniredisStride-th, with the hand-picked
// cases a table keeps whole, on miniredis (gopher-lua, by EVALSHA: the
// path of a Redis without FUNCTION). miniredis builds a Lua state for
// every script call; under -race on a loaded 2-core machine the whole
// tables took 500 of the package's 850 s there (TestLuaGolden 168 s,
// TestTakeLoneMatchesOld 151 s), enough to pass go test's 10-minute
// limit. A sample still catches what differs between the two
// interpreters: such a difference is in how a script's arithmetic or
// replies come out, which every case exercises.
const miniredisStride = 8

// onMiniredis reports whether case i of a table is replayed on miniredis.
func onMiniredis(i int) bool { return i%miniredisStride == 0 }

// miniredisSample returns the cases of a table replayed on miniredis:
// those onMiniredis picks and those keep says to keep (nil: none more).
func miniredisSample[T any](cases []T, keep func(T) bool) []T {
	var out []T
	for i, c := range cases {
		if onMiniredis(i) || (keep != nil && keep(c)) {
			out = append(out, c)
		}
	}
	return out
}
