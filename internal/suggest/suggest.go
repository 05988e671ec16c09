// Package suggest finds the known name a mistyped one most likely stands
// for: the "did you mean" of config errors (an unknown YAML field) and of
// the proxy's refusals (a path one or two letters off an endpoint).
package suggest

import "strings"

// MaxLen is the longest input Closest considers, in bytes: names and
// paths worth a suggestion are short, and the work (len(s) × len(k) per
// known name) stays bounded whatever a caller sends.
const MaxLen = 64

// Closest returns the entry of known that s most likely stands for, or ""
// when none is near: compared in lower case, among the entries within an
// edit distance of 2 and those that are a prefix of s or have s as a
// prefix (a name cut short or run on), the one nearest to s by edit
// distance, the first in known on a tie. So an entry equal to s in lower
// case wins ("Redis" stands for "redis", not for "redis_cluster", which it
// begins), and a letter off beats a prefix ("redis_clustr" stands for
// "redis_cluster", not for "redis"). An s longer than MaxLen yields "".
func Closest(s string, known []string) string {
	if len(s) > MaxLen {
		return ""
	}
	f := strings.ToLower(s)
	best, bestDistance := "", 0
	for _, k := range known {
		d := Distance(f, k)
		if d > 2 && !strings.HasPrefix(k, f) && !strings.HasPrefix(f, k) {
			continue
		}
		if best == "" || d < bestDistance {
			best, bestDistance = k, d
		}
	}
	return best
}

// Distance is the Levenshtein distance between a and b, counted in bytes
// (insertions, deletions and substitutions of one byte each). It allocates
// two rows of len(b)+1 ints.
func Distance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
