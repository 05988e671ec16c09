package weigher

import (
	"slices"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/llmguard/llmguard/internal/jsonscan"
)

// TestWalkKeys: walkKeys visits exactly the members want accepts, in order,
// with the values walk gives them, whether the doc has a layout or not
// (raw or parsed), and nil wants every member.
func TestWalkKeys(t *testing.T) {
	body := `{"a":1,"b":[2,3],"c":"x","b\u0032":{"d":4},"e":null}`
	want := func(k string) bool { return k == "b" || k == "b2" || k == "e" }
	lay := new(jsonscan.Layout)
	if err := jsonscan.Check([]byte(body), jsonscan.Options{DuplicateKeys: true, Layout: lay}); err != nil {
		t.Fatal(err)
	}
	for _, d := range []doc{
		{root: gjson.Parse(body), body: body},
		{root: rawValue(body), body: body, lay: lay},
	} {
		for _, raw := range []bool{true, false} {
			var all, some []string
			d.walk(raw, func(k string, v gjson.Result, _ elements) bool { all = append(all, k+"="+v.Raw); return true })
			d.walkKeys(raw, want, func(k string, v gjson.Result, _ elements) bool { some = append(some, k+"="+v.Raw); return true })
			var filtered []string
			for _, kv := range all {
				if want(kv[:strings.IndexByte(kv, '=')]) {
					filtered = append(filtered, kv)
				}
			}
			if len(all) != 5 || !slices.Equal(some, filtered) || len(some) != 3 {
				t.Fatalf("layout %v raw %v: walk %q, walkKeys %q, want %q", d.lay != nil, raw, all, some, filtered)
			}
			var none []string
			d.walkKeys(raw, nil, func(k string, v gjson.Result, _ elements) bool { none = append(none, k+"="+v.Raw); return true })
			if !slices.Equal(none, all) {
				t.Fatalf("layout %v raw %v: walkKeys(nil) %q, walk %q", d.lay != nil, raw, none, all)
			}
		}
	}
}
