package weigher

import (
	"sync/atomic"

	"github.com/tidwall/gjson"

	"github.com/llmguard/llmguard/internal/jsonscan"
)

// fields are the names the weigher reads in one kind of JSON object (the
// top level of a request, a message, a content part…), each with the
// fields of the objects it reads below that name (nil: none). A decoder
// that matches keys to fields ignoring case (Go's encoding/json) reads
// "MAX_TOKENS" or "Model" as the field; the weigher, like Python's json,
// reads only the exact name. So no object the weigher reads may hold a key
// that is one of its fields only when case is ignored ([checkFields]).
//
// A value under a name may be an object (read with the sub-fields) or an
// array of them (each read with the sub-fields); anything else is not
// checked further, as the weigher does not read into it. Content parts,
// items and blocks of different types share one fields value: the union
// of every type's names.
type fields struct {
	// names maps each field name to the fields of the objects under it.
	names map[string]*fields
	// list holds names' entries again, for lookup: a few length and
	// string compares cost less than hashing the key for the map.
	list []fieldName
	// slots index list by nameSlot with mix (slotFree: no name;
	// slotShared: two or more, found by a walk of list), so that lookup
	// compares one name; add picks mix so that no two names share a slot
	// when it can.
	slots [nameSlots]uint8
	mix   uint64
	// folded maps each name's fold (jsonscan.FoldKey) to the name.
	folded map[string]string
	// each, when set, makes this a map: its keys are free (a JSON schema's
	// property names), and every value is read with each.
	each *fields
	// id tells the fields apart in the count cache's keys.
	id uint64
	// whole: a list of these objects is counted as one (tool
	// definitions), so its field check is remembered for the list as a
	// whole too, in the entry that holds the list's count, and not for
	// each element.
	whole bool
}

// wholeLists marks f's lists as checked and counted whole, and returns f.
func (f *fields) wholeLists() *fields {
	f.whole = true
	return f
}

// fieldsIDs numbers the fields values (all built at init).
var fieldsIDs atomic.Uint64

// object returns the fields of an object that reads names, none of which
// has fields read below it (add them with under).
func object(names ...string) *fields {
	f := &fields{names: make(map[string]*fields, len(names)), folded: make(map[string]string, len(names)), id: fieldsIDs.Add(1)}
	for _, n := range names {
		f.add(n, nil)
	}
	return f
}

// mapOf returns the fields of a map whose every value reads value.
func mapOf(value *fields) *fields { return &fields{each: value, id: fieldsIDs.Add(1)} }

// under adds the field name, whose objects read sub, and returns f.
func (f *fields) under(name string, sub *fields) *fields {
	f.add(name, sub)
	return f
}

// fieldName is one entry of fields.list.
type fieldName struct {
	name string
	sub  *fields
}

// maxListedFields is the most names lookup finds by their slots (and a
// walk of list where names share one); fields with more are looked up in
// names. Chat's top level has 17 names: at 16, each of its members cost
// a map lookup, about 100 instructions more than a slot's compare.
const maxListedFields = 32

// nameSlots is the size of fields.slots, a power of two.
const nameSlots = 1 << nameSlotBits

// slotFree and slotShared are the marks of a slot of fields.slots with no
// name and with two or more; any other value is 1 + the name's index in
// list.
const (
	slotFree   = 0
	slotShared = 0xff
)

// nameSlot is the slot of fields.slots of the name k under the mix m: a
// hash of its length and its first, quarter, three-quarter and last
// bytes. The quarter bytes tell apart names alike in the middle byte the
// hash read before (chat's "max_tokens" and "min_tokens", Anthropic's
// "context" and "content"), which shared a slot under every mix, so that
// chat's top level was walked through its list for every member that
// fell there ("messages" and "max_tokens" among them): about 150
// instructions of a warm 1 KiB chat body (TestFieldSlotsDistinct).
func nameSlot(k string, m uint64) uint {
	if k == "" {
		return 0
	}
	h := (uint64(len(k)) ^ uint64(k[0])<<8 ^ uint64(k[len(k)-1])<<16 ^ uint64(k[len(k)/4])<<24 ^ uint64(k[len(k)*3/4])<<32) * (m | 1)
	return uint(h >> (64 - nameSlotBits))
}

// nameSlotBits is log2 of nameSlots.
const nameSlotBits = 6

// maxNameMixes is how many mixes add tries for slots no two names share.
const maxNameMixes = 4096

// fillSlots sets f.slots for its names: under the first mix (of
// maxNameMixes) that gives each its own slot, else under the last tried,
// the slots of two or more marked shared.
func (f *fields) fillSlots() {
	for try := uint64(0); try < maxNameMixes; try++ {
		f.mix = 0x9e3779b97f4a7c15 + try*0xbf58476d1ce4e5b9
		f.slots = [nameSlots]uint8{}
		distinct := true
		for i, n := range f.list {
			slot := &f.slots[nameSlot(n.name, f.mix)]
			if *slot == slotFree && i+1 < slotShared {
				*slot = uint8(i + 1)
			} else {
				*slot, distinct = slotShared, false
			}
		}
		if distinct {
			return
		}
	}
}

// lookup returns the fields under the field name k and whether k is one of
// f's names (names[k]). A name is found by its slot (nameSlot), compared
// once; where the fields' names share a slot, by a walk of list, as every
// key was found before, a walk that cost a warm 1 KiB chat body about
// 1,800 instructions (TestLookupSameAsNames, FuzzLookupSameAsNames: the
// map is the reference).
func (f *fields) lookup(k string) (*fields, bool) {
	if len(f.list) > maxListedFields {
		sub, ok := f.names[k]
		return sub, ok
	}
	switch j := f.slots[nameSlot(k, f.mix)]; j {
	case slotFree:
		return nil, false
	case slotShared:
		for i := range f.list {
			if len(f.list[i].name) == len(k) && f.list[i].name == k {
				return f.list[i].sub, true
			}
		}
		return nil, false
	default:
		if n := &f.list[j-1]; n.name == k {
			return n.sub, true
		}
		return nil, false
	}
}

// add adds the field name, whose objects read sub (nil: none). The field
// sets are built at init: a name added twice is a mistake in this file,
// and panics there.
func (f *fields) add(name string, sub *fields) {
	if _, again := f.names[name]; again {
		panic("weigher: field " + name + " named twice")
	}
	f.list = append(f.list, fieldName{name: name, sub: sub})
	f.names[name] = sub
	f.fillSlots()
	f.folded[string(jsonscan.FoldKey(nil, []byte(name)))] = name
}

// maxFieldsDepth bounds how deep checkFields follows nested fields: below
// it the weigher reads nothing (schemas are read 8 levels deep, content
// blocks 4; see maxSchemaDepth and maxBlockDepth), so it checks nothing.
const maxFieldsDepth = 24

// checkFields walks the objects of v that f describes and returns the first
// key that names one of their fields only when case is ignored, with that
// field; ok is false when there is one. The body has passed jsonscan (so
// keys are unique, even folded); each object's keys are read once, so the
// walk is linear in the part of the body the weigher reads.
//
// The elements of top-level arrays found fine are remembered in the count cache,
// through the request's memo (nil: none), so that a conversation resent
// with one more turn has only that turn walked.
func checkFields(d doc, f *fields, cache *elemMemo) (key, field string, ok bool) {
	if d.lay == nil {
		return checkFieldsAt(d.root, f, 0, cache)
	}
	ok = true
	var fold []byte
	d.walk(true, func(k string, v gjson.Result, elems elements) bool {
		key, field, ok = checkMember(k, v, elems, f, 0, cache, &fold)
		return ok
	})
	return key, field, ok
}

// checkFieldsAt is checkFields for the value v read with f at depth: the
// first key of the objects below v that f describes that names one of
// their fields only when case is ignored, with that field (ok false).
// Without a cache (what lies below a top-level element, and every element
// of a list checked whole) it is walkFields, one pass over v's text.
func checkFieldsAt(v gjson.Result, f *fields, depth int, cache *elemMemo) (key, field string, ok bool) {
	if f == nil || depth > maxFieldsDepth {
		return "", "", true
	}
	if cache == nil {
		if !v.IsObject() && !v.IsArray() {
			return "", "", true // not walked: a scalar holds no key (and may be long)
		}
		var fold []byte
		_, key, field, ok = walkFields(v.Raw, skipSpace(v.Raw, 0), f, depth, &fold)
		return key, field, ok
	}
	if v.IsArray() {
		return checkElements(elements{v: v, raw: true}, f, depth, cache)
	}
	if !v.IsObject() {
		return "", "", true
	}
	ok = true
	var fold []byte
	rawMembers(v.Raw, func(k string, val gjson.Result) bool {
		key, field, ok = checkMember(k, val, elements{v: val, raw: true}, f, depth, cache, &fold)
		return ok
	})
	return key, field, ok
}

// walkFields is checkFieldsAt without a cache for the value at s[i] (s
// the text of a value that passed jsonscan, or of a part of one): the
// same keys checked in the same order with the same answer, in one pass.
// end is the offset just past the value (len(s) when s ends first). A
// member's value is walked into by the call that checks it, which returns
// its end, where checkFieldsAt's rawMembers stepped over each value with
// Skip and then walked it again one level down: a value d levels deep was
// skipped d times (a tool's description 5, under function, parameters,
// properties and a property), the larger part of a cold 1 KiB chat body's
// field check (TestWalkFieldsSameAsMembers, FuzzWalkFieldsSameAsMembers:
// checkFieldsAt's walk by rawMembers is the reference). The recursion is
// at most maxFieldsDepth deep: below it values are stepped over.
func walkFields(s string, i int, f *fields, depth int, fold *[]byte) (end int, key, field string, ok bool) {
	if i >= len(s) {
		return len(s), "", "", true
	}
	if f == nil || depth > maxFieldsDepth || s[i] != '{' && s[i] != '[' {
		return skipValue(s, i), "", "", true
	}
	if s[i] == '[' {
		// checkElements: each object element with f one level down.
		i = skipSpace(s, i+1)
		for i < len(s) && s[i] != ']' {
			if s[i] == '{' {
				if end, key, field, ok = walkFields(s, i, f, depth+1, fold); !ok {
					return end, key, field, false
				}
			} else {
				end = skipValue(s, i)
			}
			i = skipSpace(s, end)
			if i < len(s) && s[i] == ',' {
				i = skipSpace(s, i+1)
			}
		}
		return min(i+1, len(s)), "", "", true
	}
	w := newMemberWalk(s[i:])
	for {
		k, more := w.key()
		if !more {
			return min(i+w.at()+1, len(s)), "", "", true
		}
		at := w.at()
		var e int
		// checkMember without a cache: a value under a field (or any
		// value of a map) is checked with its fields one level down (an
		// array under a field, its elements: checkElements; checkWhole
		// is the same without a cache); another key must not be a
		// field's variant.
		sub, exact := f.each, f.each != nil
		if !exact {
			sub, exact = f.lookup(k)
		}
		if exact {
			if e, key, field, ok = walkFields(w.obj, at, sub, depth+1, fold); !ok {
				return i + e, key, field, false
			}
		} else {
			if !jsonscan.Folded(k) {
				*fold = jsonscan.FoldKey((*fold)[:0], []byte(k))
				if name, variant := f.folded[string(*fold)]; variant {
					return i + at, k, name, false
				}
			}
			e = skipValue(w.obj, at)
		}
		w.skipTo(e)
	}
}

// checkElements checks the objects of an array read with f.
//
// Only the elements of a top-level array are remembered: what lies below
// one (content parts, tool calls) is checked only when its element is new,
// and is then new itself but for a rare repeat, so marking it cost a hash,
// a lookup and a cache write per nested object (about 2,500 instructions)
// for nothing.
func checkElements(elems elements, f *fields, depth int, cache *elemMemo) (key, field string, ok bool) {
	ok = true
	ctx := cache.fieldsContext(f, depth+1)
	if elems.laid && cache != nil {
		// The elements where the scan found them, read in a loop over
		// their spans: elements.each's two closures and a gjson.Result
		// made for every element cost a warm 1 KiB chat body (the load
		// benchmark's) about 780 instructions of its 41,750 under
		// callgrind. An element is an object when its text begins with
		// '{' (a laid span is a value that passed the scan: never empty,
		// no space around it), as IsObject tells of elemValue's Result,
		// raw or parsed.
		if !elems.v.IsArray() {
			return "", "", true
		}
		for _, sp := range elems.spans {
			raw := elems.body[sp.Start:sp.End]
			if raw[0] != '{' {
				continue
			}
			if !cache.checked(ctx, raw, func() bool {
				key, field, ok = checkFieldsAt(elemValue(elems.raw, raw), f, depth+1, nil)
				return ok
			}) {
				return key, field, false
			}
		}
		return key, field, true
	}
	elems.each(func(e gjson.Result) bool {
		if e.IsObject() {
			ok = cache.checked(ctx, e.Raw, func() bool {
				key, field, ok = checkFieldsAt(e, f, depth+1, nil)
				return ok
			})
		}
		return ok
	})
	return key, field, ok
}

// checkWhole checks the objects of the list raw (its elements elems), read
// with f, as one: remembered in cache as a list, its elements checked
// afresh (and not remembered one by one) when the list is new.
func checkWhole(elems elements, raw string, f *fields, depth int, cache *elemMemo) (key, field string, ok bool) {
	ok = cache.checked(cache.listContext(f, depth), raw, func() bool {
		key, field, ok = checkElements(elems, f, depth, nil)
		return ok
	})
	return key, field, ok
}

// fieldValue reports whether checkMember(k, v, …, f, depth, cache, fold)
// has nothing to check in the member k: v (of type t, a value as rawValue
// gives it), with or without a cache (it reads none for such a member): k
// is one of f's fields, and no object lies under it to check (none read
// below k, or v neither an object nor an array). It is a lookup
// alone, so that a walk checking a new message's members (its role, its
// text) skips checkMember's call, whose arguments (two structs of about
// 200 bytes, copied) cost each member more than the lookup; it answers
// false when it does not know, and the caller then calls checkMember
// (TestFieldValueSameAsCheckMember, FuzzFieldValueSameAsCheckMember).
func fieldValue(k string, t gjson.Type, f *fields) bool {
	sub, exact := f.lookup(k) // never exact in a map (f.each): it lists no name
	return exact && (sub == nil || t != gjson.JSON)
}

// checkMember checks the member k: val (whose elements, when an array, are
// elems) of an object read with f at depth; fold is scratch.
func checkMember(k string, val gjson.Result, elems elements, f *fields, depth int, cache *elemMemo, fold *[]byte) (key, field string, ok bool) {
	if f.each != nil {
		return checkFieldsAt(val, f.each, depth+1, cache)
	}
	if sub, exact := f.lookup(k); exact {
		if sub != nil && val.IsArray() && depth+1 <= maxFieldsDepth {
			if sub.whole {
				return checkWhole(elems, val.Raw, sub, depth+1, cache)
			}
			return checkElements(elems, sub, depth+1, cache)
		}
		return checkFieldsAt(val, sub, depth+1, cache)
	}
	if jsonscan.Folded(k) {
		return "", "", true // its own fold, and not a field: no field's variant
	}
	*fold = jsonscan.FoldKey((*fold)[:0], []byte(k))
	if name, variant := f.folded[string(*fold)]; variant {
		return k, name, false
	}
	return "", "", true
}

// The fields each request kind reads, from the readers in chat.go,
// responses.go, completions.go, messages.go and tools.go (a reader that
// reads a new field names it here too; TestFieldsCoverReaders finds the
// ones it forgets).
var (
	// schemaFields: one JSON-schema property, as toolsCounter.properties
	// reads it.
	schemaFields = func() *fields {
		s := object("enum", "type", "description")
		return s.under("properties", mapOf(s)).under("items", object().under("properties", mapOf(s)))
	}()
	// functionFields: a chat tool, or a legacy function (toolsCounter.count
	// reads a tool without "function" as the function itself).
	functionFields = object("type", "name", "description").
			under("parameters", object().under("properties", mapOf(schemaFields))).wholeLists()
	toolFields = object("type", "name", "description").
			under("function", functionFields).
			under("parameters", object().under("properties", mapOf(schemaFields))).wholeLists()

	callFields       = object("name", "arguments")
	customCallFields = object("name", "input")
	// chatToolCallFields: an element of a chat message's tool_calls.
	// The names a message, part, call, item, block or tool reads include
	// those it knows and does not weigh (unknownmembers.go): any other
	// member is weighed by its text, so a case variant of a known one
	// must not pass.
	chatToolCallFields = object("id", "type", "index").under("function", callFields).under("custom", customCallFields)
	chatPartFields     = object("type", "text", "refusal", "input_audio", "cache_control").
				under("image_url", object("url", "detail")).
				under("file", object("filename", "file_data", "file_id"))
	chatMessageFields = object("role", "refusal", "name", "audio", "tool_call_id", "reasoning", "reasoning_content", "reasoning_details",
		"annotations", "cache_control", "prefix").
		under("content", chatPartFields).
		under("tool_calls", chatToolCallFields).
		under("function_call", callFields)
	chatFields = object("model", "max_completion_tokens", "max_tokens", "n", "n_cmpl", "best_of", "stream", "service_tier", "data_sources", "web_search_options", "plugins",
		"audio", "modalities", "chat_template", "documents", "chat_template_kwargs", "min_tokens", "ignore_eos", "n_predict", "max_length", "mm_processor_kwargs", "prompt", "tool_choice").
		under("reasoning", object("max_tokens")).
		under("messages", chatMessageFields).
		under("tools", toolFields).
		under("functions", functionFields).
		under("stream_options", object("include_usage")).
		under("response_format", object("json_schema")).
		under("prediction", object().under("content", chatPartFields))

	// responsesPartFields: a Responses content part, or a
	// computer_call_output's output.
	responsesPartFields = object("type", "text", "refusal", "image_url", "detail", "filename", "file_data", "file_id", "file_url",
		"annotations", "logprobs")
	// responsesItemFields: every input item type's fields (message,
	// function and custom tool calls and outputs, reasoning).
	responsesItemFields = object("type", "role", "name", "arguments", "input", "encrypted_content", "id", "status", "call_id",
		"acknowledged_safety_checks").
		under("content", responsesPartFields).
		under("output", responsesPartFields).
		under("summary", object("text"))
	responsesFields = object("model", "max_output_tokens", "max_tokens", "n_predict", "stream", "previous_response_id", "conversation", "prompt", "plugins", "service_tier", "background",
		"max_tool_calls", "tool_choice", "context_management", "n", "n_cmpl", "best_of", "min_tokens", "ignore_eos").
		under("input", responsesItemFields).
		under("instructions", responsesItemFields).
		under("tools", toolFields).
		under("text", object().under("format", object("type"))).
		under("reasoning", object("max_tokens"))

	completionsFields = object("model", "prompt", "suffix", "max_tokens", "n", "n_cmpl", "best_of", "echo", "stream", "min_tokens", "ignore_eos", "n_predict", "max_length", "plugins").
				under("stream_options", object("include_usage"))
	embeddingsFields = object("model", "input", "texts", "inputs", "prompt")
	imagesFields     = object("model", "prompt", "n", "size", "quality", "stream", "partial_images")

	// claudeBlockFields: every content block type's fields, blocks nested
	// in tool results, search results and document sources included.
	claudeBlockFields = func() *fields {
		b := object("type", "text", "title", "context", "thinking", "data", "name", "input",
			"cache_control", "citations", "signature", "id", "tool_use_id", "is_error", "server_name", "caller")
		b.under("source", object("type", "data", "media_type", "url", "file_id").under("content", b))
		return b.under("content", b)
	}()
	messagesFields = object("model", "max_tokens", "stream", "mcp_servers", "speed", "inference_geo", "output_format", "plugins").
			under("output_config", object("format")).
			under("system", claudeBlockFields).
			under("messages", object("role").under("content", claudeBlockFields)).
			under("tools", object("type", "name", "description", "input_schema", "input_examples", "max_uses",
			"cache_control", "defer_loading", "allowed_callers", "strict", "eager_input_streaming",
			"display_width_px", "display_height_px", "display_number", "enable_zoom", "max_characters").wholeLists()).
		under("tool_choice", object("type", "name", "disable_parallel_tool_use")).
		under("thinking", object("type"))
)
