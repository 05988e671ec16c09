package weigher

import (
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/llmguard/llmguard/internal/jsonscan"
)

// gjsonToolsCount is toolsCounter.count as it was before the single-pass
// walk: every name found by gjson's Get, every text joined with +. The
// differential tests hold the walk to it.
func gjsonToolsCount(c toolsCounter, list gjson.Result) int64 {
	if !list.IsArray() {
		return 0
	}
	var n int64
	functions := 0
	list.ForEach(func(_, t gjson.Result) bool {
		if !t.IsObject() {
			return true
		}
		fn := t
		if f := t.Get("function"); f.IsObject() {
			fn = f
		} else if typ := t.Get("type"); typ.Exists() && typ.String() != "function" {
			n += countText(c.enc, t.Raw)
			return true
		}
		functions++
		n += c.funcInit
		n += countText(c.enc, fn.Get("name").String()+":"+trimDot(fn.Get("description").String()))
		n += gjsonProperties(c, fn.Get("parameters.properties"), 0)
		return true
	})
	if functions > 0 {
		n += funcEnd
	}
	return n
}

func gjsonProperties(c toolsCounter, props gjson.Result, depth int) int64 {
	if !props.IsObject() || depth > maxSchemaDepth {
		return 0
	}
	var n int64
	any := false
	props.ForEach(func(key, p gjson.Result) bool {
		any = true
		n += propKey
		if enum := p.Get("enum"); enum.IsArray() {
			n += enumInit
			enum.ForEach(func(_, item gjson.Result) bool {
				n += enumItem + countText(c.enc, item.String())
				return true
			})
		}
		n += countText(c.enc, key.String()+":"+p.Get("type").String()+":"+trimDot(p.Get("description").String()))
		n += gjsonProperties(c, p.Get("properties"), depth+1)
		n += gjsonProperties(c, p.Get("items.properties"), depth+1)
		return true
	})
	if any {
		n += propInit
	}
	return n
}

// toolLists are tool lists of every shape toolsCounter reads: chat tools,
// legacy functions, custom tools, nested and array properties, enums of
// every JSON type, names that are not strings, escaped keys and texts,
// descriptions with and without a final dot, and values of the wrong type
// where objects are expected.
var toolLists = []string{
	cookbookTools,
	`[{"type":"function","function":{"name":"get_weather","description":"Get the weather.","parameters":{"type":"object","properties":{"location":{"type":"string","description":"City, e.g. Paris."},"unit":{"type":"string","enum":["c","f",1,2.50,1e3,true,null,{"a":1},["x"]]}}}}}]`,
	`[{"name":"legacy","description":"A legacy function","parameters":{"properties":{"a":{"type":"object","properties":{"b":{"type":"array","items":{"properties":{"c":{"type":"integer","description":"deep."}}}}}}}}}]`,
	`[{"type":"custom","name":"grammar","format":{"type":"grammar","syntax":"lark"}},{"type":"web_search"},{"type":1},{"type":null,"name":"n"}]`,
	`[{"type":"function","function":{"name":12,"description":{"x":"y"},"parameters":{"properties":{"k":"not an object","l":[1,2],"m":{"type":["string","null"],"description":"Th\u00e9 \"quoted\" text.\n"}}}}}]`,
	`[{"function":"not an object","name":"n\u0061me","description":"d.."},1,"s",null,[],{}]`,
	`[{"type":"function","function":{"name":"f","parameters":{"properties":{"\u006by":{"enum":"not an array","items":{"properties":"x"}},"é":{"type":"string"}}}}}]`,
	`{"not":"a list"}`,
	`[]`,
}

// TestToolsCountMatchesGjson: the single-pass tool counter gives the count
// of the gjson one on every shape, in both fast encodings and a legacy one.
func TestToolsCountMatchesGjson(t *testing.T) {
	w := testWeigher(t)
	for _, enc := range []string{EncodingO200k, EncodingCL100k, EncodingP50k} {
		tc := newToolsCounter(w.encoders[enc], enc)
		for i, list := range toolLists {
			if err := jsonscan.Check([]byte(list), jsonscan.Options{DuplicateKeys: true, UTF8: true}); err != nil {
				t.Fatalf("list %d is not a valid tools list: %v", i, err)
			}
			v := gjson.Parse(list)
			if got, want := tc.count(v), gjsonToolsCount(tc, v); got != want || want == 0 && i < len(toolLists)-2 {
				t.Errorf("%s: list %d: %d tokens, gjson's walk %d", enc, i, got, want)
			}
		}
	}
}

// FuzzToolsCount holds the single-pass tool counter to the gjson one on
// any tools list that passes the request check.
func FuzzToolsCount(f *testing.F) {
	for _, l := range toolLists {
		f.Add(l)
	}
	w := testWeigher(f)
	tcs := []toolsCounter{newToolsCounter(w.encoders[EncodingO200k], EncodingO200k), newToolsCounter(w.encoders[EncodingCL100k], EncodingCL100k)}
	f.Fuzz(func(t *testing.T, list string) {
		if jsonscan.Check([]byte(list), jsonscan.Options{DuplicateKeys: true, UTF8: true}) != nil {
			return
		}
		v := gjson.Parse(strings.TrimSpace(list))
		for _, tc := range tcs {
			if got, want := tc.count(v), gjsonToolsCount(tc, v); got != want {
				t.Errorf("%q: %d tokens, gjson's walk %d", list, got, want)
			}
		}
	})
}
