package jsonscan

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/llmguard/llmguard/internal/jsonscan/internal/oldscan"
)

// sameAsOld fails t unless Check gives b what the frozen scan of a112cdd
// (oldscan) gives it under every combination of the options the proxy
// uses: the same reason and offset, and, when b passes, the same layout.
func sameAsOld(t *testing.T, b []byte, limit int) {
	t.Helper()
	oldscan.UseSeed(seed)
	var lay Layout
	var old oldscan.Layout
	for flags := range 16 {
		dup, fold, utf, laid := flags&1 != 0, flags&2 != 0, flags&4 != 0, flags&8 != 0
		opt := Options{MaxDepth: limit, DuplicateKeys: dup, FoldCase: fold, UTF8: utf}
		ref := oldscan.Options{MaxDepth: limit, DuplicateKeys: dup, FoldCase: fold, UTF8: utf}
		if laid {
			opt.Layout, ref.Layout = &lay, &old
		}
		got, want := Check(b, opt), oldscan.Check(b, ref)
		if (got == nil) != (want == nil) {
			t.Fatalf("%q %+v: %v, old scan %v", b, opt, got, want)
		}
		if got != nil {
			g, w := got.(*Error), want.(*oldscan.Error)
			if uint8(g.Reason) != uint8(w.Reason) || g.Offset != w.Offset || g.MaxDepth != w.MaxDepth || g.Error() != w.Error() {
				t.Fatalf("%q %+v: %v (reason %d), old scan %v (reason %d)", b, opt, got, g.Reason, want, w.Reason)
			}
			continue
		}
		if !laid {
			continue
		}
		same := lay.Dropped == old.Dropped && len(lay.Members) == len(old.Members) && len(lay.Elems) == len(old.Elems)
		for i := 0; same && i < len(lay.Members); i++ {
			m, o := lay.Members[i], old.Members[i]
			same = m.Key.Start == o.Key.Start && m.Key.End == o.Key.End && m.Value.Start == o.Value.Start &&
				m.Value.End == o.Value.End && m.First == o.First && m.Last == o.Last && m.Unlaid == o.Unlaid
		}
		for i := 0; same && i < len(lay.Elems); i++ {
			same = lay.Elems[i].Start == old.Elems[i].Start && lay.Elems[i].End == old.Elems[i].End
		}
		if !same {
			t.Fatalf("%q %+v: layout %+v, old scan %+v", b, opt, lay, old)
		}
	}
}

// oldScanSeeds are documents for the comparison with the old scan: the
// package's fuzz corpus, the key-span cases, and short and long keys and
// strings (ending within a word of their quote, at its last byte, past
// it, at the input's end), escaped, not UTF-8, in another case.
func oldScanSeeds(t testing.TB) [][]byte {
	seeds := [][]byte{
		[]byte(mockAnswer), chatBody(1 << 10), chatBody(4 << 10),
		[]byte(`{"a":"","ab":"x","abcdefg":"1234567","abcdefgh":"12345678","abcdefghi":"123456789"}`),
		[]byte(`{"role":"user","ROLE":"x"}`), []byte(`{"role":"user","Role":"x","role":"y"}`),
		[]byte(`{"k\u0041":1,"kA":2,"ka":3}`), []byte(`{"\u212a":1,"k":2}`), []byte(`{"K":1,"k":2}`), []byte(`{"ſ":1,"S":2}`),
		[]byte("{\"a\xff\":1,\"A\xff\":2}"), []byte("{\"abc\x01\":1}"), []byte("{\"ab\\\"c\":1,\"AB\\\"C\":2}"),
		[]byte(`{"abcdefg"`), []byte(`{"abcdefgh`), []byte(`{"a":"abcdefg`), []byte(`["abcdefg"]`), []byte(`"abcdefg"`),
		[]byte(`{"` + strings.Repeat("K", 20) + `":1,"` + strings.Repeat("k", 20) + `":2}`),
		[]byte("{" + keys(20) + `,"K19":1}`), []byte("{" + keys(15) + `,"K3":1}`), []byte("{" + keys(16) + `,"K3":1}`),
		[]byte(`{"m":[{"Role":"a","role":"b"}],"M":1}`), []byte(`{"model":"x","messages":[],"MODEL":"y"}`),
		// Multi-byte text, valid and not, with quotes, escapes and control
		// characters after it: the UTF-8 check of whole runs.
		[]byte(`{"content":"la limite de débit du requête, réponse: é"}`), []byte(`["запрос ответ лимит бюджет","的一是不了人"]`),
		[]byte("[\"d\xc3\xa9bit \xc3\xa9t\xc3\xa9 \xff \xc3\xa9\"]"), []byte("[\"\xc3\xa9\xc3\"]"), []byte("[\"\xc3\xa9\xc3\\n\"]"),
		[]byte("[\"\xc3\xa9 x\x01 \xff\"]"), []byte("[\"\xc3\xa9 x\\u00e9 \xe2\x82\"]"), []byte("[\"\xed\xa0\x80 ok\"]"),
		[]byte("[\"\xf0\x9f\x98\x80\xf0\x9f\x98\"]"), []byte("{\"\xc3\xa9t\xc3\xa9\":1,\"\xc3\x89T\xc3\x89\":2}"), []byte("[\"\xc3\xa9\x00\"]"),
	}
	for _, c := range keySpanCases {
		seeds = append(seeds, []byte(c), []byte(strings.ToUpper(c)), []byte(strings.Replace(c, `"a"`, `"A"`, 1)))
	}
	files, _ := filepath.Glob("testdata/fuzz/*/*")
	for _, f := range files {
		if b, err := os.ReadFile(f); err == nil {
			seeds = append(seeds, b) // the corpus file's text: go test fuzz v1 lines, JSON-ish enough
		}
	}
	return slices.Clip(seeds)
}

// TestSameAsOldScan compares Check with the old scan on the seeds, each
// cut short at every byte, under three nesting limits.
func TestSameAsOldScan(t *testing.T) {
	for _, b := range oldScanSeeds(t) {
		for _, limit := range []int{0, 2, -1} {
			for n := range min(len(b), 2000) + 1 {
				sameAsOld(t, b[:n], limit)
			}
			sameAsOld(t, b, limit)
		}
	}
}

// FuzzSameAsOldScan is TestSameAsOldScan on any input.
func FuzzSameAsOldScan(f *testing.F) {
	for _, b := range oldScanSeeds(f) {
		f.Add(b, uint8(4))
	}
	f.Fuzz(func(t *testing.T, b []byte, limit uint8) {
		sameAsOld(t, b, int(limit%8)-1)
	})
}

// TestUTF8RunsLinear: a string of many multi-byte sequences with a bad one
// at its end is refused at that byte, the run before it checked whole
// once, not once per sequence (which would take minutes here: the test
// would time out rather than fail).
func TestUTF8RunsLinear(t *testing.T) {
	body := []byte(`["` + strings.Repeat("é ", 1<<19) + "\xff" + `"]`)
	at := len(body) - 3
	err := Check(body, Options{UTF8: true})
	if e, ok := err.(*Error); !ok || e.Reason != NotUTF8 || e.Offset != at {
		t.Fatalf("%v, want not UTF-8 at %d", err, at)
	}
}
