package weigher

import (
	"slices"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/llmguard/llmguard/internal/jsonscan"
)

// gjsonToolsCount is toolsCounter.count as it was before the single-pass
// walk: every name found by gjson's Get, every text joined with +. The
// differential tests hold the walk to it. The members the cookbook's rule
// does not read are counted as schemaRest says (refRest).
func gjsonToolsCount(c toolsCounter, list gjson.Result) int64 {
	if !list.IsArray() {
		return countValue(c.enc, list) // not a list: by its JSON text
	}
	var n int64
	functions := 0
	list.ForEach(func(_, t gjson.Result) bool {
		if !t.IsObject() {
			n += countValue(c.enc, t) // not a tool: by its JSON text
			return true
		}
		fn := t
		if f := t.Get("function"); f.IsObject() {
			fn = f
			var own refRest
			t.ForEach(func(k, v gjson.Result) bool {
				switch k.String() {
				case "type", "function":
				case "name", "description":
					n += countText(c.enc, k.String()+":"+v.Raw)
				case "parameters":
					if v.IsObject() {
						n += countText(c.enc, "parameters:"+v.Raw)
					} else {
						own.add(c, "parameters", v.Raw)
					}
				default:
					own.add(c, k.String(), v.Raw)
				}
				return true
			})
			n += own.done(c)
		} else if typ := t.Get("type"); typ.Exists() && typ.String() != "function" {
			n += countText(c.enc, t.Raw)
			return true
		}
		functions++
		n += c.funcInit
		n += countText(c.enc, fn.Get("name").String()+":"+trimDot(fn.Get("description").String()))
		var fr refRest
		fn.ForEach(func(k, v gjson.Result) bool {
			switch k.String() {
			case "name", "description":
			case "type":
				if fn.Raw != t.Raw { // the wrapper's type is the tool's
					fr.add(c, "type", v.Raw)
				}
			case "parameters":
				if !v.IsObject() {
					fr.add(c, "parameters", v.Raw)
					return true
				}
				var pr refRest
				v.ForEach(func(k, p gjson.Result) bool {
					if k.String() == "properties" {
						if sub, ok := gjsonProperties(c, p, 0); ok {
							n += sub
							pr.propsLen = len(p.Raw)
							return true
						}
					}
					pr.add(c, k.String(), p.Raw)
					return true
				})
				n += pr.done(c)
			default:
				fr.add(c, k.String(), v.Raw)
			}
			return true
		})
		n += fr.done(c)
		return true
	})
	if functions > 0 {
		n += funcEnd
	}
	return n
}

// refRest is schemaRest for the reference.
type refRest struct {
	extra    int64
	required string
	propsLen int
}

func (r *refRest) add(c toolsCounter, k, v string) {
	switch {
	case k == "type" && slices.Contains(schemaTypeNames, v):
		return
	case (k == "strict" || k == "additionalProperties") && (v == "true" || v == "false"):
		return
	case k == "required" && r.required == "" && strings.HasPrefix(v, "["):
		r.required = v
		return
	}
	r.extra += countText(c.enc, k+":"+v)
}

func (r *refRest) done(c toolsCounter) int64 {
	if r.required != "" && len(r.required) > r.propsLen {
		return r.extra + countText(c.enc, "required:"+r.required)
	}
	return r.extra
}

func gjsonProperties(c toolsCounter, props gjson.Result, depth int) (int64, bool) {
	if !props.IsObject() || depth > maxSchemaDepth {
		return 0, false
	}
	var n int64
	any := false
	props.ForEach(func(key, p gjson.Result) bool {
		any = true
		n += propKey
		if !p.IsObject() {
			n += countText(c.enc, p.Raw)
		} else {
			var r refRest
			p.ForEach(func(k, v gjson.Result) bool {
				switch k.String() {
				case "type", "description":
					return true
				case "enum":
					if v.IsArray() {
						n += enumInit
						v.ForEach(func(_, item gjson.Result) bool {
							n += enumItem + countText(c.enc, item.String())
							return true
						})
						return true
					}
				case "properties":
					if sub, ok := gjsonProperties(c, v, depth+1); ok {
						n += sub
						r.propsLen = len(v.Raw)
						return true
					}
				case "items":
					if v.IsObject() {
						var ir refRest
						v.ForEach(func(k, iv gjson.Result) bool {
							if k.String() == "properties" {
								if sub, ok := gjsonProperties(c, iv, depth+1); ok {
									n += sub
									ir.propsLen = len(iv.Raw)
									return true
								}
							}
							ir.add(c, k.String(), iv.Raw)
							return true
						})
						n += ir.done(c)
						return true
					}
				}
				r.add(c, k.String(), v.Raw)
				return true
			})
			n += r.done(c)
		}
		n += countText(c.enc, key.String()+":"+p.Get("type").String()+":"+trimDot(p.Get("description").String()))
		return true
	})
	if any {
		n += propInit
	}
	return n, true
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
	// Members the cookbook's rule does not read (counted as text, schemaRest).
	`[{"type":"function","strict":true,"description":"own","x":1,"function":{"name":"f","type":"function","strict":false,"x-ext":{"a":"b"},"parameters":{"type":"object","title":"T","$defs":{"d":{"type":"string"}},"additionalProperties":false,"required":["a"],"properties":{"a":{"type":"string","anyOf":[{"type":"string"}],"default":"x","examples":["e"],"required":["zzzzzzzzzzzzzzzzzzzzzzzzz"],"enum":"no","items":{"type":"string","default":"d","required":["q"],"properties":{}}},"b":"plain","c":{"properties":"no","items":[1]}}}}}]`,
	`[{"name":"legacy","function":"not an object","parameters":"not an object","required":["r"]},{"type":"function","name":"flat","parameters":{"type":"nope","properties":[],"required":"x"}}]`,
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

// A tool's members beyond the cookbook's rule are counted as their text:
// a list holding thousands of words in any of them weighs at least those
// words, while the cookbook's own example keeps its published count
// (TestChatCookbookPublishedCounts).
func TestToolSchemaMembersCounted(t *testing.T) {
	w := testWeigher(t)
	tc := newToolsCounter(w.encoders[EncodingO200k], EncodingO200k)
	words := strings.Repeat("word ", 1000)
	floor := countText(w.encoders[EncodingO200k], words)
	for _, list := range []string{
		`[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{"a":{"type":"string","examples":["` + words + `"]}}}}}]`,
		`[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{"a":{"anyOf":[{"description":"` + words + `"}]}}}}}]`,
		`[{"type":"function","function":{"name":"f","parameters":{"type":"object","$defs":{"d":{"description":"` + words + `"}}}}}]`,
		`[{"type":"function","function":{"name":"f","parameters":{"title":"` + words + `"}}}]`,
		`[{"type":"function","function":{"name":"f","parameters":{"properties":{"a":{"items":{"default":"` + words + `"}}}}}}]`,
		`[{"type":"function","function":{"name":"f","parameters":{"properties":{"a":{"enum":{"x":"` + words + `"}}}}}}]`,
		`[{"type":"function","function":{"name":"f","parameters":{"properties":{"a":"` + words + `"}}}}]`,
		`[{"type":"function","function":{"name":"f","x-notes":"` + words + `"}}]`,
		`[{"type":"function","description":"` + words + `","function":{"name":"f"}}]`,
		`[{"type":"function","function":{"name":"f","parameters":{"properties":{"a":{}},"required":["` + words + `"]}}}]`,
		`[{"name":"f","function":"` + words + `"}]`,
		`[{"name":"f","parameters":{"type":"` + words + `"}}]`,
	} {
		if n := tc.count(gjson.Parse(list)); n < floor {
			t.Errorf("%.100s: %d tokens, want at least the %d of its words", list, n, floor)
		}
	}
}
