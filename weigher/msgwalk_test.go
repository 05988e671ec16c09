package weigher

import (
	"bytes"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/llmguard/llmguard/internal/jsonscan"
)

// messageTokensGJSON is messageTokens as it read a message's content parts
// and tool calls before partTally, eachValue and callTally: with gjson's
// ForEach and Get. Kept as the reference the raw reader must equal.
func messageTokensGJSON(enc counter, model string, m gjson.Result) tally {
	if !m.IsObject() {
		if m.Type == gjson.Null {
			return tally{}
		}
		return tally{text: tokensPerMessage + countValue(enc, m)} // by its JSON text
	}
	n := int64(tokensPerMessage)
	hidden, audio := false, false
	rawMembers(m.Raw, func(k string, v gjson.Result) bool {
		switch k {
		case "role", "refusal":
			n += countValue(enc, v) // a string by its text, another value by its JSON text
		case "name":
			n += countValue(enc, v) + tokensPerName
		case "content":
			if v.IsArray() {
				v.ForEach(func(_, p gjson.Result) bool {
					pn, ph := partWeight(enc, model, p)
					n += pn
					hidden = hidden || ph
					audio = audio || partSendsAudio(p)
					return true
				})
			} else if v.IsObject() {
				// One part where a list was expected (shared with the
				// raw reader: the walk of parts is what is compared).
				t := objectContentTally(enc, model, v)
				n += t.text
				hidden = hidden || t.hidden
				audio = audio || t.audio
			} else {
				n += countValue(enc, v)
			}
		case "tool_calls":
			if !v.IsArray() {
				n += countValue(enc, v) // not a list: by its JSON text
				break
			}
			v.ForEach(func(_, c gjson.Result) bool {
				n += unknownMembers(enc, c, chatToolCallKnown)
				switch f := c.Get("function"); {
				case !c.IsObject():
					n += countValue(enc, c) // not a call: by its JSON text
				case f.IsObject():
					n += callTokensGJSON(enc, f)
				default:
					n += countValue(enc, f)
				}
				return true
			})
		case "function_call":
			n += callTokensGJSON(enc, v)
		case "audio":
			if v.Type != gjson.Null {
				hidden, audio = true, true
			}
		default:
			if !chatMessageKnown(k) {
				n += unknownMember(enc, k, v)
			}
		}
		return true
	})
	return tally{text: n, hidden: hidden, audio: audio}
}

// callTokensGJSON is callTally as gjson's Get read it.
func callTokensGJSON(enc counter, fn gjson.Result) int64 {
	if !fn.IsObject() {
		return countValue(enc, fn) // not an object: by its JSON text
	}
	return tokensPerToolCall + countValue(enc, fn.Get("name")) + countValue(enc, fn.Get("arguments")) +
		unknownMembers(enc, fn, func(k string) bool { return k == "name" || k == "arguments" })
}

// messageWalkCases are chat messages of every shape messageTokens reads:
// content as a string, parts of each type (escaped types and texts,
// members in either order, bare strings, numbers), tool calls as an
// array, an object, a string or null, function_call, audio.
var messageWalkCases = []string{
	`{"role":"user","content":"hello there, how are you?"}`,
	`{"role":"user","content":[{"type":"text","text":"hi"},{"text":"first","type":"text"},"bare \u00e9 string",42,null,{"type":"refusal","refusal":"no"}]}`,
	`{"role":"user","content":[{"type":"te\u0078t","text":"esc\naped \ud83d\ude00"},{"type":"text"},{"type":"text","text":7},{"type":5,"text":"x"},{"type":"text","refusal":"r"}]}`,
	`{"role":"user","content":[{"type":"refusal","text":"t"},{"type":"text","text":"a","input_audio":null},{"type":"input_audio","input_audio":{"data":"AAAA","format":"wav"}},{"input_audio":1}]}`,
	`{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==","detail":"high"}},{"type":"image_url","image_url":"https://x/y.png"}]}`,
	`{"role":"user","content":[{"type":"file","file":{"file_id":"file-1"}},{"type":"file","file":{"filename":"a.pdf","file_data":"data:application/pdf;base64,JVBERi0="}},{"type":"other","x":[1,2]},{}]}`,
	`{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"search_docs","arguments":"{\"query\": \"rates\"}"}},{"function":{"arguments":"{}","name":"f"}},{"function":"x"},"s",3,{"function":{"name":1}}]}`,
	`{"role":"assistant","tool_calls":{"a":{"function":{"name":"f","arguments":"1"}},"b":2}}`,
	`{"role":"assistant","tool_calls":"not a list"}`,
	`{"role":"assistant","tool_calls":null,"function_call":{"name":"g","arguments":"{\"a\":1}"}}`,
	`{"role":"assistant","tool_calls":[[{"function":{"name":"f"}}]],"function_call":"x"}`,
	`{"role":"assistant","content":"","audio":{"id":"audio_1"},"name":"bob","refusal":"sorry"}`,
	`{"role":"assistant","audio":null,"tool_calls":[]}`,
	`{"role":"user","content":[]}`,
	`{"role":"user","content":{"type":"text","text":"one part object"}}`,
	`{"role":"user","content":{"type":"video_url","video_url":{"url":"https://example.com/v.mp4"}}}`,
	`{"role":"user","content":{"type":"audio_url","audio_url":{"url":"https://example.com/a.wav"}}}`,
	`{"role":"user","content":[{"type":"file","file":{"file_data":"data:audio/wav;base64,UklGRg==","filename":"a.wav"}}]}`,
	`{"role":"user","content":[{"type":"text","text":"only this part","input_audio":{}}]}`,
	`{"role":"user","content":[{"type":"refusal","refusal":"only a refusal"}]}`,
	`{"role":{"r":"an object role"},"name":["a","list"],"content":12345678901234567890,"refusal":{"x":"an object refusal"}}`,
	`{"role":"assistant","tool_calls":[{"function":{"name":{"n":"object name"},"arguments":"{}"}}],"function_call":{"name":["g"],"arguments":1}}`,
	`{}`,
	`[1,2]`,
	`"a string message"`,
}

// TestMessageTokensSameAsGJSON: the raw reader of a message's parts and
// tool calls counts every shape as the gjson reader did.
func TestMessageTokensSameAsGJSON(t *testing.T) {
	w := testWeigher(t)
	for _, enc := range []string{EncodingO200k, EncodingCL100k} {
		for _, m := range messageWalkCases {
			if !sameMessageTokens(t, w.encoders[enc], "gpt-4o", []byte(m)) {
				t.Fatalf("%s does not pass the strict scan", m)
			}
		}
	}
}

// sameMessageTokens checks messageTokens against messageTokensGJSON on m
// when m passes the weigher's strict scan (as every message weighed has),
// and returns whether it did.
func sameMessageTokens(t *testing.T, enc counter, model string, m []byte) bool {
	t.Helper()
	if jsonscan.Check(m, jsonscan.Options{FoldCase: true, UTF8: true}) != nil {
		return false
	}
	raw := string(bytes.TrimSpace(m))
	v := rawValue(raw)
	if got, want := messageTokens(enc, model, v), messageTokensGJSON(enc, model, v); got != want {
		t.Fatalf("%s: %+v, gjson reader %+v", raw, got, want)
	}
	return true
}

// FuzzMessageTokensSameAsGJSON: on any message that passes the strict
// scan, the raw reader counts what the gjson reader counted.
func FuzzMessageTokensSameAsGJSON(f *testing.F) {
	for _, m := range messageWalkCases {
		f.Add([]byte(m))
	}
	f.Add([]byte(strings.Repeat(`{"role":"user","content":[`, 1) + `{"type":"text","text":"` + strings.Repeat("word ", 40) + `"}]}`))
	w := testWeigher(f)
	enc := w.encoders[EncodingO200k]
	f.Fuzz(func(t *testing.T, m []byte) {
		sameMessageTokens(t, enc, "gpt-4o", m)
	})
}

// messageCheckCases are chat messages holding case variants of the fields
// the weigher reads (and other keys) at every depth the message field
// check walks: the message, content parts, image_url, file, tool calls,
// their function, function_call; escaped keys; folded keys that are no
// field.
var messageCheckCases = []string{
	`{"ROLE":"user","content":"a variant of role, first"}`,
	`{"role":"user","Content":"a variant of content"}`,
	`{"role":"user","content":"fine","Name":"x"}`,
	`{"\u0052ole":"escaped variant","content":"fine"}`,
	`{"role":"user","content":"fine","r\u006fle2":"no field","extra":1,"Tool_Call_Id":"x"}`,
	`{"role":"user","content":[{"type":"text","Text":"variant in a part"}]}`,
	`{"role":"user","content":[{"type":"text","text":"ok"},{"TYPE":"text","text":"second part"}]}`,
	`{"role":"user","content":[{"type":"image_url","image_url":{"URL":"https://x/y.png"}}]}`,
	`{"role":"user","content":[{"type":"image_url","image_url":{"url":"https://x/y.png","Detail":"low"}}]}`,
	`{"role":"user","content":[{"type":"file","file":{"File_Data":"x"}}]}`,
	`{"role":"user","content":{"Text":"content as an object"}}`,
	`{"role":"assistant","tool_calls":[{"function":{"Name":"f","arguments":"{}"}}]}`,
	`{"role":"assistant","tool_calls":[{"Function":{"name":"f"}}]}`,
	`{"tool_calls":[{"function":{"name":"f","Arguments":"{}"}}],"ROLE":"late"}`,
	`{"role":"assistant","function_call":{"NAME":"g"}}`,
	`{"role":"assistant","audio":{"ID":"a"},"Refusal":"x"}`,
	`{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"search_docs","arguments":"{\"query\": \"rates\"}"}}]}`,
}

// TestMessageTallySameAsSeparatePasses: the one walk that counts and
// checks a new message gives the count messageTokens gives and the
// answer of the field check (checkFieldsAt, as checkElements runs it on
// a top-level message), on every shape and variant.
func TestMessageTallySameAsSeparatePasses(t *testing.T) {
	w := testWeigher(t)
	enc := w.encoders[EncodingO200k]
	failed := 0
	for _, m := range append(append([]string(nil), messageWalkCases...), messageCheckCases...) {
		ok, passed := sameMessageTally(t, enc, []byte(m))
		if !ok {
			t.Fatalf("%s does not pass the strict scan", m)
		}
		if !passed {
			failed++
		}
	}
	// One of them holds no variant (the last); "Tool_Call_Id" is one of
	// tool_call_id, a field the message knows and does not weigh
	// (unknownmembers.go), which its fields list.
	if failed != len(messageCheckCases)-1 {
		t.Errorf("%d messages failed the check, want %d", failed, len(messageCheckCases)-1)
	}
}

// sameMessageTally checks messageTally against messageTokens and
// checkFieldsAt on m when m passes the strict scan (ok), and returns
// whether m passed the field check.
func sameMessageTally(t *testing.T, enc counter, m []byte) (ok, passed bool) {
	t.Helper()
	if jsonscan.Check(m, jsonscan.Options{FoldCase: true, UTF8: true}) != nil {
		return false, false
	}
	raw := string(bytes.TrimSpace(m))
	v := rawValue(raw)
	want := messageTokens(enc, "gpt-4o", v)
	_, _, wantOK := checkFieldsAt(v, chatMessageFields, 2, nil)
	if !v.IsObject() {
		wantOK = true // checkElements checks objects only
	}
	got, gotOK := messageTally(enc, "gpt-4o", v, true)
	if got != want || gotOK != wantOK {
		t.Fatalf("%s: %+v, %v; separate passes %+v, %v", raw, got, gotOK, want, wantOK)
	}
	if got, gotOK := messageTally(enc, "gpt-4o", v, false); got != want || !gotOK {
		t.Fatalf("%s unchecked: %+v, %v; messageTokens %+v", raw, got, gotOK, want)
	}
	sameLaidTally(t, enc, raw, want, wantOK)
	return true, wantOK
}

// sameLaidTally checks messageTallyIn, walking the members the strict
// scan recorded (jsonscan.Layout.Fields) of the message raw as an element
// of a chat body's messages, against want and wantOK (messageTally's),
// checked and not, when that body passes the scan.
func sameLaidTally(t *testing.T, enc counter, raw string, want tally, wantOK bool) {
	t.Helper()
	body := `{"messages":[` + raw + `]}`
	lay := new(jsonscan.Layout)
	if jsonscan.Check([]byte(body), jsonscan.Options{FoldCase: true, UTF8: true, Layout: lay, Fields: true}) != nil || lay.Dropped || len(lay.Elems) != 1 {
		return // nested one level too deep, or not laid out
	}
	d := doc{body: body, lay: lay}
	at := lay.Elems[0]
	laid := d.fieldsOf(at)
	if len(laid.fields) == 0 && strings.Contains(raw, ":") && raw[0] == '{' {
		t.Fatalf("%s: no fields recorded", raw)
	}
	v := rawValue(body[at.Start:at.End])
	if got, gotOK := messageTallyIn(enc, "gpt-4o", v, true, laid); got != want || gotOK != wantOK {
		t.Fatalf("%s laid: %+v, %v; rawMembers' walk %+v, %v", raw, got, gotOK, want, wantOK)
	}
	if got, gotOK := messageTallyIn(enc, "gpt-4o", v, false, laid); got != want || !gotOK {
		t.Fatalf("%s laid, unchecked: %+v, %v; rawMembers' walk %+v", raw, got, gotOK, want)
	}
}

// FuzzMessageTallySameAsSeparatePasses: on any message that passes the
// strict scan, the one walk counts and checks as the two passes did.
func FuzzMessageTallySameAsSeparatePasses(f *testing.F) {
	for _, m := range append(append([]string(nil), messageWalkCases...), messageCheckCases...) {
		f.Add([]byte(m))
	}
	w := testWeigher(f)
	enc := w.encoders[EncodingO200k]
	f.Fuzz(func(t *testing.T, m []byte) {
		sameMessageTally(t, enc, m)
	})
}

// TestNewMessagesCheckedWhenCounted: a chat body whose new messages are
// field-checked in the counting walk is weighed, refused or not, as the
// plain weigher weighs it, with the same key named: variants in a new
// message, in a remembered one's neighbour, in members before and after
// the messages, in two places at once, and in a body resumed from a
// remembered prefix.
func TestNewMessagesCheckedWhenCounted(t *testing.T) {
	long := func(i int) string {
		return `{"role":"user","content":"message ` + strings.Repeat("long enough to be remembered ", 3) + string(rune('a'+i)) + `"}`
	}
	msgs := []string{long(0), long(1), long(2)}
	body := func(pre string, ms []string, post string) []byte {
		return []byte(`{"model":"gpt-4o"` + pre + `,"messages":[` + strings.Join(ms, ",") + `]` + post + `,"max_tokens":50}`)
	}
	bad := `{"role":"user","Content":"` + strings.Repeat("a variant in a new message ", 3) + `"}`
	bad2 := `{"ROLE":"user","content":"` + strings.Repeat("a second variant in a new message ", 3) + `"}`
	call := `{"role":"assistant","tool_calls":[{"function":{"name":"f","Arguments":"` + strings.Repeat("x", 60) + `"}}]}`
	w := cachedWeigher(t, 1<<20)
	p := plain(t)
	for i, tc := range []struct {
		first, second []byte
		refused       bool
	}{
		{body("", msgs, ""), body("", append(msgs, bad), ""), true},
		{body("", msgs, ""), body("", append(msgs, bad, bad2), ""), true},
		{body("", msgs, ""), body("", append(msgs, bad), `,"Tools":[]`), true},
		{body("", msgs, ""), body(`,"N":1`, append(msgs, bad), ""), true},
		{body("", msgs, ""), body("", append([]string{bad}, msgs...), `,"Tools":[]`), true},
		{body("", msgs, ""), body("", append(msgs, call), ""), true},
		{body("", msgs, ""), body("", append(msgs, long(3)), `,"Stream":true`), true},
		{body("", msgs, ""), body("", append(msgs, long(3), bad), ""), true},
		{body("", msgs, ""), body("", []string{msgs[0], bad, msgs[2]}, ""), true},
		{body("", msgs, ""), body("", append(msgs, long(4)), ""), false},
	} {
		w.Chat(tc.first)
		got, want := w.Chat(tc.second), p.Chat(tc.second)
		if got != want {
			t.Errorf("case %d: %+v, plain %+v", i, got, want)
		}
		if got.Parsed == tc.refused {
			t.Errorf("case %d: parsed %v, want %v: %+v", i, got.Parsed, !tc.refused, got)
		}
		sameAsPlain(t, KindChat, tc.second)
	}
}

// fieldsWeighers are weighers alike but for how a new chat message's
// members are walked: ws as the strict scan recorded them
// (jsonscan.Layout.Fields), one with the process's count cache (a new
// message is field-checked in the walk that counts it) and one without;
// ref by rawMembers (noFields), without the count cache, so that no count
// it makes is one the others made.
func fieldsWeighers(tb testing.TB) (ws []*Weigher, ref *Weigher) {
	tb.Helper()
	w, err := New(Options{Models: map[string]Model{"gpt-4o": {DefaultMaxOutputTokens: 4096}}, DefaultMaxOutputTokens: 1000})
	if err != nil {
		tb.Fatal(err)
	}
	bare, r := *w, *w
	bare.cache = nil
	r.cache, r.noFields = nil, true
	return []*Weigher{w, &bare}, &r
}

// sameWithFields fails t unless ws and ref (fieldsWeighers) give each
// body the same estimate, in order (the later ones warm through the
// cache: messages remembered, resumed from the earlier bodies'
// checkpoints).
func sameWithFields(t *testing.T, ws []*Weigher, ref *Weigher, bodies ...[]byte) {
	t.Helper()
	for i, b := range bodies {
		want := ref.Chat(b)
		for j, w := range ws {
			if got := w.Chat(b); got != want {
				t.Fatalf("body %d %q, weigher %d: %+v, walked by rawMembers %+v", i, b, j, got, want)
			}
		}
	}
}

// grownChat is body with the message m added at the end of its last
// array (its messages, when they come last), as an agent's next request:
// nil when body holds no messages.
func grownChat(body []byte, m string) []byte {
	j := bytes.LastIndex(body, []byte("]"))
	if j < 0 || !bytes.Contains(body, []byte(`"messages":[`)) {
		return nil
	}
	sep := ","
	if k := bytes.LastIndexAny(body[:j], "[,{}\"0123456789el "); k >= 0 && body[k] == '[' {
		sep = ""
	}
	return append(append(append(append([]byte(nil), body[:j]...), sep...), m...), body[j:]...)
}

// TestChatFieldsSameAsRawWalk: a chat body weighs the same whether its new
// messages' members are walked as the scan recorded them or found again
// by rawMembers, cold and warm, on the message cases of this file, on
// bodies refused for a message's field (a variant of a key), and on a
// conversation growing one message at a time.
func TestChatFieldsSameAsRawWalk(t *testing.T) {
	ws, ref := fieldsWeighers(t)
	for _, m := range append(append([]string(nil), messageWalkCases...), messageCheckCases...) {
		b := []byte(`{"model":"gpt-4o","messages":[{"role":"system","content":"be brief, as the user asks you"},` + m + `],"max_tokens":9}`)
		sameWithFields(t, ws, ref, b, b)
		if len(m) > 2 && m[0] == '{' && m[len(m)-1] == '}' {
			// Padded past minCachedBytes, so that the count cache
			// leaves its field check to the walk that counts it.
			m = m[:len(m)-1] + `,"padding":"` + strings.Repeat("pad ", minCachedBytes/4) + `"}`
			b = []byte(`{"model":"gpt-4o","messages":[{"role":"system","content":"be brief, as the user asks you"},` + m + `],"max_tokens":9}`)
			sameWithFields(t, ws, ref, b, b)
		}
	}
	refused := 0
	start := []byte(`{"model":"gpt-4o","tools":[{"type":"function","function":{"name":"f","parameters":{}}}],"messages":[{"role":"system","content":"you answer questions about llmguard"}]}`)
	body := start
	for i, m := range []string{
		`{"role":"user","content":"what is a token bucket, and why would one refill it"}`,
		`{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{\"q\":1}"}}]}`,
		`{"role":"tool","tool_call_id":"c1","content":"a bucket of tokens that refills at a rate"}`,
		`{"role":"user","content":[{"type":"text","text":"and \u00e9 in \"quotes\"?"},{"type":"image_url","image_url":{"url":"https://example.com/a.png"}}]}`,
		`{"role":"assistant","Content":"a variant of content"}`,
		`{"role":"user","name":"ann","content":"last one, with a name"}`,
	} {
		body = grownChat(body, m)
		if !ref.Chat(body).Parsed {
			refused++
		}
		sameWithFields(t, ws, ref, body)
		if i == 4 { // start again without the variant
			body = start
		}
	}
	if refused == 0 {
		t.Fatal("no body refused: the variant case checks nothing")
	}
}

// FuzzChatFieldsSameAsRawWalk: any body weighs the same with its new
// messages walked as the scan recorded them as by rawMembers, cold, then
// warm, then grown by a message.
func FuzzChatFieldsSameAsRawWalk(f *testing.F) {
	for _, m := range append(append([]string(nil), messageWalkCases...), messageCheckCases...) {
		f.Add([]byte(`{"model":"gpt-4o","messages":[{"role":"user","content":"hi there"},`+m+`]}`), `{"role":"user","content":"next"}`)
	}
	f.Add([]byte(`{"messages":[{"role":"user","content":"a","ROLE":"b"}]}`), `{"Role":"x","role":"y"}`)
	ws, ref := fieldsWeighers(f)
	f.Fuzz(func(t *testing.T, body []byte, next string) {
		sameWithFields(t, ws, ref, body, body)
		if g := grownChat(body, next); g != nil {
			sameWithFields(t, ws, ref, g)
		}
	})
}
