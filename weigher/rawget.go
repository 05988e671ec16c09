package weigher

import "github.com/tidwall/gjson"

// rawGet is the first member of v named key, as rawValue gives it, when v
// (a value as rawValue gives it) is an object: gjson's v.Get(key) for a
// one-level path, read with the span walk of rawMembers instead of gjson's
// parser. The zero Result when v is not an object or has no such member.
func rawGet(v gjson.Result, key string) gjson.Result { return member(v, key, false) }

// member is the first (last false) or last member of v named key, as
// rawValue gives it; the zero Result when v is not an object or has none.
func member(v gjson.Result, key string, last bool) gjson.Result {
	var found gjson.Result
	if !v.IsObject() {
		return found
	}
	rawMembers(v.Raw, func(k string, m gjson.Result) bool {
		if k == key {
			found = m
			return last
		}
		return true
	})
	return found
}

// rawEach calls fn with each value gjson's v.ForEach passes (as rawValue
// gives them): an array's elements or an object's member values, in order;
// any other value that exists is passed itself, once.
func rawEach(v gjson.Result, fn func(e gjson.Result) bool) {
	switch {
	case v.Raw == "":
	case v.IsArray():
		rawElements(v.Raw, fn)
	case v.IsObject():
		rawMembers(v.Raw, func(_ string, m gjson.Result) bool { return fn(m) })
	default:
		fn(v)
	}
}

// lastGet is v's member at path, one key per level, taking at each level
// the last member of that name, as JSON decoders that fill maps or structs
// read it (Python's json, JavaScript's JSON.parse, Go's encoding/json all
// keep the last; gjson's Get takes the first). The stream readers use it on
// events parseObject checked, which name no key twice, so there it reads
// the only member; the last is what any other caller would want. The zero
// Result when a level is not an object or lacks the key; the value found is
// parsed by gjson (a string's Str decoded).
func lastGet(v gjson.Result, path ...string) gjson.Result {
	for _, key := range path {
		found := member(v, key, true)
		if found.Raw == "" {
			return gjson.Result{}
		}
		v = gjson.Parse(found.Raw)
	}
	return v
}
