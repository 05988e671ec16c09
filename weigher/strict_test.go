package weigher

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/tidwall/gjson"

	"github.com/llmguard/llmguard/internal/jsonscan"
)

const strictChat = `{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}],"max_tokens":1}`

// utf16LE encodes s as UTF-16, little-endian, with a byte-order mark when
// mark is set.
func utf16LE(s string, mark bool) []byte {
	var b []byte
	if mark {
		b = append(b, 0xff, 0xfe)
	}
	for _, u := range utf16.Encode([]rune(s)) {
		b = binary.LittleEndian.AppendUint16(b, u)
	}
	return b
}

func utf16BE(s string) []byte {
	b := []byte{0xfe, 0xff}
	for _, u := range utf16.Encode([]rune(s)) {
		b = binary.BigEndian.AppendUint16(b, u)
	}
	return b
}

func utf32LE(s string) []byte {
	var b []byte
	for _, r := range s {
		b = binary.LittleEndian.AppendUint32(b, uint32(r))
	}
	return b
}

// TestFaults: every body a lenient upstream reads differently from the
// weigher is reported with its fault (and a detail naming what and where),
// in every kind; nothing the upstream reads alike is.
func TestFaults(t *testing.T) {
	w := testWeigher(t)
	for _, tc := range []struct {
		name   string
		kind   Kind
		body   []byte
		fault  Fault
		detail string // a substring of FaultDetail
	}{
		{"byte-order mark", KindChat, []byte("\xef\xbb\xbf" + strictChat), FaultByteOrderMark, "EF BB BF"},
		{"NaN", KindChat, []byte(`{"model":"gpt-4o","messages":[],"max_tokens":NaN}`), FaultInvalidJSON, "NaN and Infinity"},
		{"Infinity", KindResponses, []byte(`{"model":"gpt-4o","input":"x","max_output_tokens":Infinity}`), FaultInvalidJSON, "NaN and Infinity"},
		{"-Infinity", KindMessages, []byte(`{"model":"claude-sonnet-4-5","messages":[],"max_tokens":-Infinity}`), FaultInvalidJSON, "NaN and Infinity"},
		{"block comment", KindChat, []byte(`{"model":"gpt-4o", /* hi */ "messages":[]}`), FaultInvalidJSON, "comments"},
		{"line comment", KindChat, []byte("{\"model\":\"gpt-4o\",\n// hi\n\"messages\":[]}"), FaultInvalidJSON, "comments"},
		{"single quotes", KindChat, []byte(`{'model':'gpt-4o'}`), FaultInvalidJSON, "double quotes"},
		{"trailing object", KindChat, []byte(strictChat + `{"max_tokens":100000}`), FaultInvalidJSON, "data follows"},
		{"trailing garbage", KindCompletions, []byte(`{"prompt":"x"}x`), FaultInvalidJSON, "data follows"},
		{"trailing comma", KindChat, []byte(`{"model":"gpt-4o","messages":[],}`), FaultInvalidJSON, "unexpected '}'"},
		{"empty", KindEmbeddings, nil, FaultInvalidJSON, "empty"},
		{"cut short", KindChat, []byte(`{"model":"gpt-4o","messages":[`), FaultInvalidJSON, "ends early"},
		{"form encoded", KindChat, []byte(`model=gpt-4o`), FaultInvalidJSON, "unexpected 'm'"},
		{"UTF-16LE", KindChat, utf16LE(strictChat, false), FaultNotUTF8, "byte 1 (0x00)"},
		{"UTF-16LE with its mark", KindChat, utf16LE(strictChat, true), FaultNotUTF8, "byte 0 (0xFF)"},
		{"UTF-16BE with its mark", KindMessages, utf16BE(strictChat), FaultNotUTF8, "byte 0 (0xFE)"},
		{"UTF-32LE", KindResponses, utf32LE(strictChat), FaultNotUTF8, "UTF-16, UTF-32"},
		{"Latin-1", KindChat, []byte("{\"model\":\"gpt-4o\",\"messages\":[{\"role\":\"user\",\"content\":\"caf\xe9\"}]}"), FaultNotUTF8, "(0xE9)"},
		{"array", KindChat, []byte(`[` + strictChat + `]`), FaultNotObject, "an array"},
		{"string", KindResponses, []byte(`"hi"`), FaultNotObject, "a string"},
		{"number", KindEmbeddings, []byte(`1`), FaultNotObject, "a number"},
		{"null", KindMessages, []byte(` null `), FaultNotObject, "null"},
		{"true", KindCompletions, []byte(`true`), FaultNotObject, "a boolean"},
		{"duplicate", KindChat, []byte(`{"model":"gpt-4o","messages":[],"max_tokens":1,"max_tokens":100000}`), FaultDuplicateKey, `"max_tokens"`},
		// Two keys that differ only in case: at any level.
		{"MAX_TOKENS next to max_tokens", KindChat, []byte(`{"model":"gpt-4o","messages":[],"max_tokens":1,"MAX_TOKENS":100000}`), FaultCaseVariantKey, `"MAX_TOKENS"`},
		{"max_tokens after MAX_TOKENS", KindMessages, []byte(`{"MAX_TOKENS":100000,"model":"claude-sonnet-4-5","messages":[],"max_tokens":1}`), FaultCaseVariantKey, `"max_tokens"`},
		{"case pair in an object llmguard does not read", KindChat, []byte(`{"model":"gpt-4o","messages":[],"metadata":{"k":"a","K":"b"}}`), FaultCaseVariantKey, `"K"`},
		{"case pair as schema properties", KindChat, []byte(`{"model":"gpt-4o","messages":[],"tools":[{"type":"function","function":{"name":"f","parameters":{"properties":{"id":{},"ID":{}}}}}]}`), FaultCaseVariantKey, `"ID"`},
		// One key that is a read field only when case is ignored.
		{"Model alone", KindChat, []byte(`{"Model":"gpt-4o","messages":[]}`), FaultCaseVariantKey, `"Model" is the field "model"`},
		{"MAX_TOKENS alone", KindChat, []byte(`{"model":"gpt-4o","messages":[],"MAX_TOKENS":100000}`), FaultCaseVariantKey, `"max_tokens"`},
		{"N alone", KindChat, []byte(`{"model":"gpt-4o","messages":[],"N":50}`), FaultCaseVariantKey, `"n"`},
		{"Kelvin sign", KindChat, []byte(`{"model":"gpt-4o","messages":[],"max_to` + "\u212a" + `ens":100000}`), FaultCaseVariantKey, `"max_tokens"`},
		{"escaped variant", KindChat, []byte(`{"model":"gpt-4o","messages":[],"\u004dax_tokens":100000}`), FaultCaseVariantKey, `"Max_tokens"`},
		{"Stream", KindChat, []byte(`{"model":"gpt-4o","messages":[],"Stream":true}`), FaultCaseVariantKey, `"stream"`},
		{"message Content", KindChat, []byte(`{"model":"gpt-4o","messages":[{"role":"user","Content":"hi"}]}`), FaultCaseVariantKey, `"content"`},
		{"part Text", KindChat, []byte(`{"model":"gpt-4o","messages":[{"role":"user","content":[{"type":"text","Text":"hi"}]}]}`), FaultCaseVariantKey, `"text"`},
		{"image Detail", KindChat, []byte(`{"model":"gpt-4o","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"x","Detail":"high"}}]}]}`), FaultCaseVariantKey, `"detail"`},
		{"tool call Arguments", KindChat, []byte(`{"model":"gpt-4o","messages":[{"role":"assistant","tool_calls":[{"function":{"name":"f","Arguments":"{}"}}]}]}`), FaultCaseVariantKey, `"arguments"`},
		{"schema Description", KindChat, []byte(`{"model":"gpt-4o","messages":[],"tools":[{"type":"function","function":{"name":"f","parameters":{"properties":{"a":{"Description":"x"}}}}}]}`), FaultCaseVariantKey, `"description"`},
		{"include_usage", KindChat, []byte(`{"model":"gpt-4o","messages":[],"stream":true,"stream_options":{"Include_Usage":true}}`), FaultCaseVariantKey, `"include_usage"`},
		{"responses Max_Output_Tokens", KindResponses, []byte(`{"model":"gpt-4o","input":"x","Max_Output_Tokens":100000}`), FaultCaseVariantKey, `"max_output_tokens"`},
		{"responses Previous_Response_Id", KindResponses, []byte(`{"model":"gpt-4o","input":"x","Previous_Response_Id":"resp_1"}`), FaultCaseVariantKey, `"previous_response_id"`},
		{"responses item Content", KindResponses, []byte(`{"model":"gpt-4o","input":[{"role":"user","Content":"x"}]}`), FaultCaseVariantKey, `"content"`},
		{"responses part File_Data", KindResponses, []byte(`{"model":"gpt-4o","input":[{"role":"user","content":[{"type":"input_file","File_Data":"x"}]}]}`), FaultCaseVariantKey, `"file_data"`},
		{"completions Best_Of", KindCompletions, []byte(`{"model":"gpt-3.5-turbo-instruct","prompt":"x","Best_Of":20}`), FaultCaseVariantKey, `"best_of"`},
		{"embeddings Input", KindEmbeddings, []byte(`{"model":"text-embedding-3-small","Input":"x"}`), FaultCaseVariantKey, `"input"`},
		{"messages Max_Tokens", KindMessages, []byte(`{"model":"claude-sonnet-4-5","messages":[],"Max_Tokens":100000}`), FaultCaseVariantKey, `"max_tokens"`},
		{"messages System", KindMessages, []byte(`{"model":"claude-sonnet-4-5","messages":[],"System":"x"}`), FaultCaseVariantKey, `"system"`},
		{"nested tool_result Text", KindMessages, []byte(`{"model":"claude-sonnet-4-5","max_tokens":1,"messages":[{"role":"user","content":[{"type":"tool_result","content":[{"type":"text","Text":"x"}]}]}]}`), FaultCaseVariantKey, `"text"`},
		{"document source Data", KindMessages, []byte(`{"model":"claude-sonnet-4-5","max_tokens":1,"messages":[{"role":"user","content":[{"type":"document","source":{"type":"text","Data":"x"}}]}]}`), FaultCaseVariantKey, `"data"`},
	} {
		e := w.Weigh(tc.kind, tc.body)
		if e.Parsed || e.Fault != tc.fault || !strings.Contains(e.FaultDetail, tc.detail) {
			t.Errorf("%s: Parsed %v, fault %v (%q), want %v with %q", tc.name, e.Parsed, e.Fault, e.FaultDetail, tc.fault, tc.detail)
		}
		if e.Fault == FaultDuplicateKey || e.Fault == FaultCaseVariantKey {
			if e.Fault == FaultDuplicateKey && !e.DuplicateKeys {
				t.Errorf("%s: DuplicateKeys not set", tc.name)
			}
		}
		if e.Fault.Code() == "" || !strings.HasSuffix(e.Fault.Message(e.FaultDetail), ".") {
			t.Errorf("%s: code %q, message %q", tc.name, e.Fault.Code(), e.Fault.Message(e.FaultDetail))
		}
	}

	// What every upstream reads alike is weighed.
	for _, tc := range []struct {
		name string
		kind Kind
		body string
	}{
		{"strict chat", KindChat, strictChat},
		{"whitespace around", KindChat, " \r\n\t" + strictChat + "\n"},
		{"non-ASCII text", KindChat, `{"model":"gpt-4o","messages":[{"role":"user","content":"café 日本 😀 \u00e9"}]}`},
		{"unknown fields in any case", KindChat, `{"model":"gpt-4o","messages":[],"Temperature":1,"USER":"x"}`},
		{"schema property names are free", KindChat, `{"model":"gpt-4o","messages":[],"tools":[{"type":"function","function":{"name":"f","parameters":{"properties":{"Model":{"type":"string"},"MAX_TOKENS":{},"Description":{}}}}}]}`},
		{"objects not read are free", KindChat, `{"model":"gpt-4o","messages":[],"metadata":{"Model":"x","N":"1"}}`},
		{"tool input is free", KindMessages, `{"model":"claude-sonnet-4-5","max_tokens":1,"messages":[{"role":"assistant","content":[{"type":"tool_use","name":"f","input":{"Text":"x","Model":"y"}}]}]}`},
		{"input_schema is free", KindMessages, `{"model":"claude-sonnet-4-5","max_tokens":1,"messages":[],"tools":[{"name":"f","input_schema":{"Type":"object"}}]}`},
	} {
		if e := w.Weigh(tc.kind, []byte(tc.body)); !e.Parsed || e.Fault != FaultNone || e.FaultDetail != "" {
			t.Errorf("%s: refused: %v %q", tc.name, e.Fault, e.FaultDetail)
		}
	}
}

// richBodies use every field each reader reads, so that
// TestFieldsCoverReaders can find a field the fields table forgets.
var richBodies = []struct {
	kind Kind
	body string
}{
	{KindChat, `{"model":"gpt-4o","max_completion_tokens":30,"max_tokens":20,"n":2,"stream":true,"stream_options":{"include_usage":true},
	  "messages":[{"role":"system","content":"Be brief.","name":"boss"},
	    {"role":"user","content":[{"type":"text","text":"What is in this picture?"},{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==","detail":"low"}},{"type":"refusal","refusal":"no thanks"},{"type":"file","file":{"filename":"a.pdf","file_data":"data:application/pdf;base64,JVBERi0xLjQKL1R5cGUgL1BhZ2UK"}}]},
	    {"role":"assistant","refusal":"I refuse.","tool_calls":[{"type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}],"function_call":{"name":"legacy","arguments":"{}"}}],
	  "tools":[{"type":"function","function":{"name":"get_weather","description":"Weather of a city.","parameters":{"type":"object","properties":{"city":{"type":"string","description":"The city.","enum":["Paris","Rome"]},"when":{"type":"object","properties":{"day":{"type":"string","description":"Day."}}},"tags":{"type":"array","items":{"properties":{"tag":{"type":"string","description":"A tag."}}}}}}}}],
	  "functions":[{"name":"legacy","description":"Old style.","parameters":{"properties":{"x":{"type":"integer","description":"An x."}}}}],
	  "response_format":{"type":"json_schema","json_schema":{"name":"answer","schema":{"type":"object"}}},
	  "service_tier":"priority","data_sources":[{"type":"azure_search"}]}`},
	{KindChat, `{"model":"gpt-4o","messages":[],"tools":[{"type":"custom","name":"grammar","description":"A custom tool."}]}`},
	{KindResponses, `{"model":"gpt-4o","max_output_tokens":50,"stream":true,"previous_response_id":"resp_1","conversation":"conv_1","prompt":{"id":"pmpt_1"},"service_tier":"flex",
	  "instructions":"Be brief.",
	  "input":[{"type":"message","role":"user","name":"bob","content":[{"type":"input_text","text":"Hello there"},{"type":"input_image","image_url":"data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==","detail":"high"},{"type":"input_file","filename":"a.pdf","file_data":"data:application/pdf;base64,JVBERi0xLjQKL1R5cGUgL1BhZ2UK"},{"type":"refusal","refusal":"nope"}]},
	    {"type":"function_call","name":"get_weather","arguments":"{\"city\":\"Paris\"}"},
	    {"type":"custom_tool_call","name":"grammar","input":"some input text"},
	    {"type":"function_call_output","output":"sunny and warm"},
	    {"type":"reasoning","summary":[{"type":"summary_text","text":"I thought about it."}],"content":[{"type":"reasoning_text","text":"Step one."}],"encrypted_content":"AAAAAAAAAAAAAAAAAAAA"},
	    {"type":"computer_call_output","output":{"type":"computer_screenshot","image_url":"data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==","detail":"low"}}],
	  "tools":[{"type":"function","name":"get_weather","description":"Weather of a city.","parameters":{"properties":{"city":{"type":"string","description":"The city."}}}}],
	  "text":{"format":{"type":"json_schema","name":"x","schema":{"type":"object"}}}}`},
	{KindResponses, `{"model":"gpt-4o","instructions":[{"role":"developer","content":"Rules here."}],"input":"plain text input"}`},
	{KindCompletions, `{"model":"gpt-3.5-turbo-instruct","prompt":["one prompt","two prompt"],"suffix":"the end","max_tokens":7,"n":3,"best_of":4,"echo":true,"stream":true,"stream_options":{"include_usage":true}}`},
	{KindEmbeddings, `{"model":"text-embedding-3-small","input":["some text","more text"]}`},
	{KindImages, `{"model":"gpt-image-1","prompt":"A cat reading a book.","n":2,"size":"1024x1536","quality":"medium","stream":true}`},
	{KindMessages, `{"model":"claude-sonnet-4-5","max_tokens":64,"stream":true,"thinking":{"type":"enabled","budget_tokens":1024},"tool_choice":{"type":"any"},
	  "system":[{"type":"text","text":"Be brief."}],
	  "messages":[{"role":"user","content":[{"type":"text","text":"Hello"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="}},
	      {"type":"document","title":"Doc title","context":"Some context","source":{"type":"text","data":"Document text here."}},
	      {"type":"document","source":{"type":"content","content":[{"type":"text","text":"Inner block text."}]}},
	      {"type":"search_result","title":"Result","source":"https://example.com","content":[{"type":"text","text":"Found it."}]}]},
	    {"role":"assistant","content":[{"type":"thinking","thinking":"Let me think.","signature":"x"},{"type":"redacted_thinking","data":"AAAAAAAAAAAAAAAAAAAAAAAA"},{"type":"tool_use","id":"t1","name":"get_weather","input":{"city":"Paris"}}]},
	    {"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"text","text":"Sunny."}]}]},
	    {"role":"assistant","content":[{"type":"thinking","thinking":"More thinking now."}]}],
	  "tools":[{"name":"get_weather","description":"Weather of a city.","input_schema":{"type":"object","properties":{"city":{"type":"string"}}}}]}`},
}

// keySpan is one key of a JSON text: its bytes (quotes excluded) and the
// keys owning the containers it is in, outermost first ("" for an array
// element's).
type keySpan struct {
	start, end int
	owners     []string
}

// owner is the key owning the object s is in.
func (s keySpan) owner() string {
	if len(s.owners) == 0 {
		return ""
	}
	return s.owners[len(s.owners)-1]
}

// keySpans lists every key of a valid JSON text.
func keySpans(b []byte) []keySpan {
	var spans []keySpan
	var owners []string
	last := ""
	for i := 0; i < len(b); i++ {
		switch b[i] {
		case '"':
			j := i + 1
			for ; b[j] != '"'; j++ {
				if b[j] == '\\' {
					j++
				}
			}
			k := j + 1
			for k < len(b) && (b[k] == ' ' || b[k] == '\n' || b[k] == '\t' || b[k] == '\r') {
				k++
			}
			if k < len(b) && b[k] == ':' {
				spans = append(spans, keySpan{i + 1, j, append([]string(nil), owners...)})
				last = string(b[i+1 : j])
			}
			i = j
		case '{':
			owners = append(owners, last)
			last = ""
		case '[':
			owners = append(owners, last)
			last = "" // its elements belong to the same key
		case '}', ']':
			owners = owners[:len(owners)-1]
		case ',':
			last = ""
		}
	}
	return spans
}

// rawText are the keys under which the weigher counts JSON as text rather
// than reading fields: renaming a key below them changes the count, but
// they are not fields. Keys of a JSON schema's "properties" are names, not
// fields, too.
var rawText = map[Kind][]string{
	KindChat:      {"json_schema", "properties"},
	KindResponses: {"schema", "properties"},
	KindMessages:  {"input", "input_schema"},
}

// TestFieldsCoverReaders: every key of the rich bodies that the weigher
// reads (renaming it changes the estimate) is refused in another case, so
// the fields table lists every field the readers read.
func TestFieldsCoverReaders(t *testing.T) {
	w := testWeigher(t)
	for _, rb := range richBodies {
		body := []byte(rb.body)
		base := w.Weigh(rb.kind, body)
		if !base.Parsed {
			t.Fatalf("%v body refused: %v %s", rb.kind, base.Fault, base.FaultDetail)
		}
		read := 0
	spans:
		for _, s := range keySpans(body) {
			key := string(body[s.start:s.end])
			for _, o := range s.owners {
				if slices.Contains(rawText[rb.kind], o) {
					continue spans
				}
			}
			if s.owner() == "format" && key != "type" { // text.format: its JSON is counted, its type read
				continue
			}
			renamed := append(append(append([]byte{}, body[:s.start]...), "zq"+key...), body[s.end:]...)
			if e := w.Weigh(rb.kind, renamed); e == base {
				continue // not read here
			}
			read++
			upper := strings.ToUpper(key)
			if upper == key {
				continue
			}
			variant := append(append(append([]byte{}, body[:s.start]...), upper...), body[s.end:]...)
			if e := w.Weigh(rb.kind, variant); e.Fault != FaultCaseVariantKey {
				t.Errorf("%v: the weigher reads %q (in %q) but %q passes as %v: fields.go does not list it", rb.kind, key, s.owner(), upper, e.Fault)
			}
		}
		if read < 2 {
			t.Errorf("%v: only %d keys read: the test finds nothing", rb.kind, read)
		}
	}
}

// readSlice is the top-level fields and message fields an upstream built
// on Go's encoding/json reads, ignoring case.
type readSlice struct {
	Model               json.RawMessage `json:"model"`
	MaxTokens           json.RawMessage `json:"max_tokens"`
	MaxCompletionTokens json.RawMessage `json:"max_completion_tokens"`
	MaxOutputTokens     json.RawMessage `json:"max_output_tokens"`
	N                   json.RawMessage `json:"n"`
	Stream              json.RawMessage `json:"stream"`
	Messages            []struct {
		Role    json.RawMessage `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
}

// FuzzStrictBodies: a body the weigher weighs is read alike by Go's
// case-insensitive encoding/json and by exact key matching (Python's json,
// gjson); a body it does not weigh has a fault. Fault and Parsed agree.
func FuzzStrictBodies(f *testing.F) {
	for _, s := range []string{
		strictChat, `{"model":"gpt-4o","MAX_TOKENS":5,"max_tokens":1}`, `{"Model":"x"}`, `{"messages":[{"ROLE":"user"}]}`,
		"\xef\xbb\xbf{}", `{"n":NaN}`, `{"n":1}//`, `{"a":"\xe9"}`, `[]`, `{"max_to\u212aens":3}`, `{"ſtream":true}`,
	} {
		f.Add([]byte(s), uint8(KindChat))
	}
	w := testWeigher(f)
	f.Fuzz(func(t *testing.T, body []byte, k uint8) {
		kind := Kind(k % uint8(numKinds))
		e := w.Weigh(kind, body)
		if !kind.Weighed() {
			return
		}
		if e.Parsed != (e.Fault == FaultNone) || e.Parsed != (e.FaultDetail == "") {
			t.Fatalf("%q: Parsed %v, fault %v %q", body, e.Parsed, e.Fault, e.FaultDetail)
		}
		if !e.Parsed {
			return
		}
		if !utf8.Valid(body) || !json.Valid(body) || !gjson.ParseBytes(body).IsObject() {
			t.Fatalf("%q weighed, but it is not a UTF-8 JSON object", body)
		}
		var lenient readSlice
		if json.Unmarshal(body, &lenient) != nil {
			return // a type the upstream refuses too
		}
		root := gjson.ParseBytes(body)
		for name, got := range map[string]json.RawMessage{"model": lenient.Model, "max_tokens": lenient.MaxTokens,
			"max_completion_tokens": lenient.MaxCompletionTokens, "max_output_tokens": lenient.MaxOutputTokens,
			"n": lenient.N, "stream": lenient.Stream} {
			if exact := root.Get(gjsonEscape(name)); kindReads(kind, name) && string(got) != exact.Raw {
				t.Fatalf("%q: encoding/json reads %s as %s, exact matching as %s", body, name, got, exact.Raw)
			}
		}
		if kind == KindChat || kind == KindMessages {
			msgs := root.Get("messages").Array()
			for i, m := range lenient.Messages {
				if i < len(msgs) && msgs[i].IsObject() && (string(m.Role) != msgs[i].Get("role").Raw || string(m.Content) != msgs[i].Get("content").Raw) {
					t.Fatalf("%q: message %d read differently ignoring case", body, i)
				}
			}
		}
	})
}

// kindReads reports whether kind's top level reads name.
func kindReads(k Kind, name string) bool {
	f := map[Kind]*fields{KindChat: chatFields, KindResponses: responsesFields, KindCompletions: completionsFields,
		KindEmbeddings: embeddingsFields, KindMessages: messagesFields, KindImages: imagesFields}[k]
	if f == nil {
		panic(fmt.Sprintf("kindReads: no fields for the weighed kind %s", k))
	}
	_, ok := f.names[name]
	return ok
}

func gjsonEscape(s string) string { return strings.ReplaceAll(s, ".", `\.`) }

// TestFieldNamesAreFolded: checkFields takes a key that is its own fold and
// not a field name for no field's variant, which holds only while every
// field name is its own fold (lower-case ASCII).
func TestFieldNamesAreFolded(t *testing.T) {
	seen := map[*fields]bool{}
	var walk func(f *fields)
	walk = func(f *fields) {
		if f == nil || seen[f] {
			return
		}
		seen[f] = true
		walk(f.each)
		for name, sub := range f.names {
			if !jsonscan.Folded(name) {
				t.Errorf("field %q is not its own fold", name)
			}
			walk(sub)
		}
	}
	for _, f := range []*fields{chatFields, responsesFields, completionsFields, embeddingsFields, messagesFields} {
		walk(f)
	}
	if len(seen) < 20 {
		t.Errorf("walked only %d field sets", len(seen))
	}
}

// TestFieldsLookupMatchesNames: fields.lookup, which checkFields and the
// scan's Wants use, finds exactly the names of the map, with their
// sub-fields, in every field set; keys that differ in length, in one byte,
// or in case are not names.
func TestFieldsLookupMatchesNames(t *testing.T) {
	seen := map[*fields]bool{}
	var walk func(f *fields)
	walk = func(f *fields) {
		if f == nil || seen[f] {
			return
		}
		seen[f] = true
		walk(f.each)
		if len(f.list) != len(f.names) {
			t.Errorf("fields %d: %d listed, %d named", f.id, len(f.list), len(f.names))
		}
		for name, sub := range f.names {
			if got, ok := f.lookup(name); !ok || got != sub {
				t.Errorf("fields %d: lookup(%q) = %p, %v; want %p, true", f.id, name, got, ok, sub)
			}
			for _, other := range []string{name + "x", name[:len(name)-1], strings.ToUpper(name), "x" + name[1:], name[:len(name)-1] + "_"} {
				if _, named := f.names[other]; named {
					continue
				}
				if _, ok := f.lookup(other); ok {
					t.Errorf("fields %d: lookup(%q) found a name", f.id, other)
				}
			}
			walk(sub)
		}
	}
	for _, f := range []*fields{chatFields, responsesFields, completionsFields, embeddingsFields, messagesFields, imagesFields} {
		walk(f)
	}
	if len(seen) < 20 {
		t.Errorf("walked only %d field sets", len(seen))
	}
}
