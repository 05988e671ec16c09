package weigher

import (
	"bytes"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// offering is w with End offering every element it has no hint for
// (elemMemo.offerAll): the scan as it ran before jsonscan.NotOffered, the
// reference the declining path is compared with. It keeps its own cache,
// so that each path fills its cache and hint table itself.
func offering(tb testing.TB, bytes int64) *Weigher {
	tb.Helper()
	w := cachedWeigher(tb, bytes)
	w.offerAll = true
	return w
}

// sameThreeWays fails t unless w (declining), o (offering) and p (plain)
// weigh body as kind alike, and, when resumes is set, w and o resume
// alike. Whether a body resumes depends on what each weigher's cache still
// holds: once a long run has filled them, their evictions differ (each
// path writes its own entries and hints) and so may their resumes, with
// every estimate still equal; the fuzzer compares estimates only.
func sameThreeWays(t *testing.T, w, o, p *Weigher, kind Kind, body []byte, what string, resumes bool) {
	t.Helper()
	rw, ro := w.CacheStats().Resumed, o.CacheStats().Resumed
	got, ref, want := w.Weigh(kind, body), o.Weigh(kind, body), p.Weigh(kind, body)
	if got != ref || got != want {
		t.Fatalf("%s (%s %q):\ndeclining %+v\noffering  %+v\nplain     %+v", what, kind, body, got, ref, want)
	}
	if resumes && (w.CacheStats().Resumed > rw) != (o.CacheStats().Resumed > ro) {
		t.Fatalf("%s: declining resumed %v, offering %v", what, w.CacheStats().Resumed > rw, o.CacheStats().Resumed > ro)
	}
}

// TestNotOfferedSameAsOffered: a weigher whose memo declines elements it
// has no end hint for (jsonscan.NotOffered) weighs growing, trimmed,
// reordered and refused conversations as the offering one and a plain
// one do, step for step; and its warm bodies still have their remembered
// elements vouched for (the hints the field check writes for the
// elements it was not offered).
func TestNotOfferedSameAsOffered(t *testing.T) {
	w, o, p := cachedWeigher(t, 4<<20), offering(t, 4<<20), plain(t)
	for i, b := range growingBodies(t, "gpt-4o", 11, 24<<10) {
		sameThreeWays(t, w, o, p, KindChat, b, "growing turn "+string(rune('a'+i%26)), true)
	}
	base := agentBodyOf(6, 12, 2)
	k := lastMessageEnd(t, base)
	msg := `,{"role":"user","content":"one more question, long enough to be remembered by the count cache"}`
	steps := []struct {
		name string
		body []byte
	}{
		{"first", base},
		{"again", base},
		{"one more turn", splice(base, k, msg)},
		// Trimmed at the front: no resume point fits, every message is
		// offered (guessed by its hint, or declined) again.
		{"trimmed", bytes.Replace(splice(base, k, msg), []byte(`"messages":[{"role":"system"`), []byte(`"messages":[{"role":"developer"`), 1)},
		{"a case variant field in a new message", splice(base, k, `,{"role":"user","Content":"`+strings.Repeat("x", 140)+`"}`)},
		{"a repeated key in a new message", splice(base, k, `,{"role":"user","role":"`+strings.Repeat("x", 140)+`"}`)},
		{"not UTF-8 in a new message", splice(base, k, ",{\"role\":\"user\",\"content\":\"\xff"+strings.Repeat("x", 140)+"\"}")},
		{"invalid JSON in a new message", splice(base, k, `,{"role":"user","content":"`+strings.Repeat("x", 140)+`",}`)},
		{"too deep in a new message", splice(base, k, `,{"role":"user","content":`+strings.Repeat("[", DefaultMaxDepth)+strings.Repeat("]", DefaultMaxDepth)+`,"name":"`+strings.Repeat("x", 140)+`"}`)},
		{"tools changed", bytes.Replace(base, []byte("looks things up"), []byte("looks things over"), 1)},
		{"the base again", base},
	}
	for _, s := range steps {
		sameThreeWays(t, w, o, p, KindChat, s.body, s.name, true)
	}
	// The field check wrote the hints of the messages it was not offered:
	// each message of the last body (starting hintPrefix bytes before its
	// end, and long enough to be cached) has its length hinted.
	ctx := w.cache.fieldsContext(chatMessageFields, 2, w.maxDepth)
	hints, hinted, evicted := w.cache.hints.Load(), 0, 0
	gjson.GetBytes(base, "messages").ForEach(func(_, m gjson.Result) bool {
		if len(m.Raw) < minCachedBytes || m.Index+hintPrefix > len(base) {
			return true
		}
		hinted++
		h := w.cache.hintHash(ctx, string(base[m.Index:m.Index+hintPrefix]))
		if got := hints.get(h); got != len(m.Raw) {
			// The table is direct-mapped and seeded at random: a later
			// hint may hold this one's slot (another tag there), which is
			// eviction, not a missing write (TestEndHashesWriteTheHints).
			if got == 0 && uint32(hints.slots[h&hints.mask].Load()>>32) != uint32(h>>32) {
				evicted++
				return true
			}
			t.Errorf("message at %d (%d bytes): hint %d", m.Index, len(m.Raw), got)
		}
		return true
	})
	if hinted == 0 || evicted > 2 {
		t.Fatalf("%d messages to look the hint of up, %d of them missing (evicted or never written)", hinted, evicted)
	}
	// A conversation weighed twice without a resume point (resumes off
	// with a budget: TestResume… covers them) has its old messages found
	// in the cache by both paths: as many hits.
	h0 := w.CacheStats().Hits
	w.Weigh(KindChat, base)
	if w.CacheStats().Hits == h0 {
		t.Errorf("declining: the base weighed again found nothing in the cache")
	}
}

// FuzzNotOfferedSameAsOffered: a remembered body, edited anywhere, is
// weighed by the declining weigher as by the offering one and a plain
// one, as chat or Responses.
func FuzzNotOfferedSameAsOffered(f *testing.F) {
	base := agentBodyOf(9, 6, 1)
	k := bytes.Index(base, []byte(`}],"tools"`)) + 1
	input := bytes.Replace(base, []byte(`"messages":[`), []byte(`"input":[`), 1)
	long := strings.Repeat("a message long enough to be remembered ", 4)
	f.Add(base, uint16(k), uint16(0), []byte(`,{"role":"user","content":"`+long+`"}`), false)
	f.Add(base, uint16(k), uint16(0), []byte(`,{"role":"user","role":"`+long+`"}`), false)
	f.Add(base, uint16(k), uint16(0), []byte(`,{"role":"user","CONTENT":"`+long+`"}`), false)
	f.Add(base, uint16(40), uint16(30), []byte(``), false)
	f.Add(base, uint16(k-5), uint16(1), []byte("\xff"), false)
	f.Add(input, uint16(k-3), uint16(0), []byte(`,{"type":"message","role":"user","content":"`+long+`"}`), true)
	w, o, p := cachedWeigher(f, 1<<20), offering(f, 1<<20), plain(f)
	f.Fuzz(func(t *testing.T, body []byte, at, cut uint16, insert []byte, responses bool) {
		kind := KindChat
		if responses {
			kind = KindResponses
		}
		sameThreeWays(t, w, o, p, kind, body, "first", false)
		a := min(int(at), len(body))
		c := min(a+int(cut), len(body))
		edited := append(append(append([]byte(nil), body[:a]...), insert...), body[c:]...)
		sameThreeWays(t, w, o, p, kind, edited, "edited", false)
		sameThreeWays(t, w, o, p, kind, body, "first again", false)
	})
}
