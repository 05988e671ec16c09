package weigher

import (
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/llmguard/llmguard/internal/nativetest"
)

// memoCounterTexts are texts one request's counter counts one after the
// other: words its memo remembers from an earlier text, pieces of 2 to 16
// bytes that share a slot, long CJK and Cyrillic runs (the heap merge),
// text with escapes (countRaw's buffer, reused), invalid UTF-8 (counted
// again, decoded).
var memoCounterTexts = []string{
	"The quick brown fox jumps over the lazy dog.", "the quick brown fox", "quick quick quick",
	"请求响应速率限制预算本月账单错误为什么如何我们需要修复这个服务上线之前延迟吞吐量",
	"запрос ответ лимит бюджет месяц счёт ошибка", "line one\nline \"two\"\n\ttabbed \\ back",
	"a\xffb\xe6\x97", "func main() {\n\treturn len(limitWriter), nil\n}\n", "{\"id\": 251016459, \"score\": 0.5613}",
	"", "x", "assistant", strings.Repeat("ab", 40), strings.Repeat("0123456789", 9),
}

// TestMemoCounterSameCounts: one request's memoCounter, counting text
// after text with the same memo and buffer, gives each text the count of
// its counter (checked against tiktoken-go by TestBPECounterMatchesTiktoken),
// both counted plain (countText) and as an escaped JSON string (countRaw).
func TestMemoCounterSameCounts(t *testing.T) {
	if nativetest.Run(t) {
		return
	}
	r := rand.New(rand.NewPCG(3, 4))
	texts := append([]string(nil), memoCounterTexts...)
	for range 2000 {
		texts = append(texts, randomText(r, 1+r.IntN(40)))
	}
	for _, c := range shortTextCounters(t) {
		mc := c.takeMemo()
		for i, s := range texts {
			want := c.count(s)
			if got := countText(mc, s); got != want {
				t.Fatalf("o200k %v: text %d: countText(memoCounter, %q) = %d, counter %d", c.o200k, i, s, got, want)
			}
			if got, want := countRaw(mc, jsonString(t, s)), countRaw(c, jsonString(t, s)); got != want {
				t.Fatalf("o200k %v: text %d: countRaw(memoCounter, %q) = %d, counter %d", c.o200k, i, s, got, want)
			}
		}
		c.putMemo(mc)
	}
}

// FuzzMemoCounterSameCounts: the same for any two texts counted in turn,
// each plain and escaped, by one memoCounter.
func FuzzMemoCounterSameCounts(f *testing.F) {
	for i, s := range memoCounterTexts {
		f.Add(s, memoCounterTexts[(i+1)%len(memoCounterTexts)])
	}
	cs := shortTextCounters(f)
	f.Fuzz(func(t *testing.T, a, b string) {
		for _, c := range cs {
			mc := c.takeMemo()
			for _, s := range []string{a, b, a} {
				if got, want := countText(mc, s), c.count(s); got != want {
					t.Fatalf("o200k %v: countText(memoCounter, %q) = %d, counter %d", c.o200k, s, got, want)
				}
				if got, want := countRaw(mc, jsonString(t, s)), countRaw(c, jsonString(t, s)); got != want {
					t.Fatalf("o200k %v: countRaw(memoCounter, %q) = %d, counter %d", c.o200k, s, got, want)
				}
			}
			c.putMemo(mc)
		}
	})
}

// jsonString is s as a JSON string value, escaped as encoding/json
// escapes it, as rawValue gives it.
func jsonString(t *testing.T, s string) gjson.Result {
	t.Helper()
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	return rawValue(string(b))
}
