package weigher

import (
	"bytes"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/llmguard/llmguard/spec"
)

// servedTierGJSON is servedTier by another path, the reference the tests
// hold it to: v is the member's value as gjson parses it (decoded).
func servedTierGJSON(v gjson.Result) string {
	switch {
	case !v.Exists() || v.Type == gjson.Null:
		return ""
	case v.Type != gjson.String:
		return spec.TierUnread
	case len(v.Str) > spec.MaxServiceTierBytes:
		return spec.TierUnread
	}
	return v.Str
}

// tierCases are service_tier members as an answer may write them, and the
// tier each names.
var tierCases = []struct{ member, want string }{
	{``, ""},
	{`"service_tier":"priority",`, "priority"},
	{`"service_tier":"default",`, "default"},
	{`"service_tier":"flex",`, "flex"},
	{`"service_tier":null,`, ""},
	{`"service_tier":"",`, ""},
	{`"service_tier":"on_demand",`, "on_demand"},
	{`"service_tier":"pri\u006frity",`, "priority"},
	{`"service_tier":1,`, spec.TierUnread},
	{`"service_tier":true,`, spec.TierUnread},
	{`"service_tier":{"tier":"default"},`, spec.TierUnread},
	{`"service_tier":["default"],`, spec.TierUnread},
	{`"service_tier":"` + strings.Repeat("p", 33) + `",`, spec.TierUnread},
	{`"service_tier":"` + strings.Repeat(`\u0070`, 32) + `",`, strings.Repeat("p", 32)},
	{`"service_tier":"` + strings.Repeat(`\u0070`, 33) + `",`, spec.TierUnread},
	{`"service_tier":"` + strings.Repeat("x", 1<<20) + `",`, spec.TierUnread},
}

// A chat or Responses JSON answer carries the service tier it names into
// its usage, read alike by the one-pass readers (the shape of the last
// chat answer too) and the checked ones; a Messages answer's
// usage.service_tier is not read (Anthropic bills priority tokens at the
// standard rate).
func TestServedTierJSON(t *testing.T) {
	for _, c := range tierCases {
		chat := `{"id":"c","object":"chat.completion","model":"gpt-5",` + c.member + `"choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":9,"completion_tokens":1,"total_tokens":10}}`
		resp := `{"id":"r","object":"response","model":"gpt-5",` + c.member + `"output":[],"usage":{"input_tokens":9,"output_tokens":1,"total_tokens":10}}`
		for _, read := range []struct {
			name string
			u    func() (Usage, bool)
		}{
			{"chat", func() (Usage, bool) { return ParseUsage(KindChat, []byte(chat)) }},
			{"chat again (shape)", func() (Usage, bool) { return ParseUsage(KindChat, []byte(chat)) }},
			{"chat checked", func() (Usage, bool) { return parseChatUsageChecked([]byte(chat), 0) }},
			{"completions", func() (Usage, bool) { return ParseUsage(KindCompletions, []byte(chat)) }},
			{"responses", func() (Usage, bool) { return ParseUsage(KindResponses, []byte(resp)) }},
			{"responses checked", func() (Usage, bool) {
				v, _, tier, ok := upstreamMembers3([]byte(resp), 0, "usage", "output", "service_tier")
				u, ok2 := responsesUsageOf(v)
				u.ServiceTier = servedTier(tier.Raw)
				return u, ok && ok2
			}},
		} {
			u, ok := read.u()
			if !ok || u.ServiceTier != c.want {
				t.Errorf("%s with %.60q: tier %q (ok %v), want %q", read.name, c.member, u.ServiceTier, ok, c.want)
			}
		}
		if want := servedTierGJSON(gjson.Get(chat, "service_tier")); want != c.want {
			t.Errorf("reference with %.60q: %q, want %q", c.member, want, c.want)
		}
	}
	msg := `{"id":"m","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"text","text":"hi"}],"usage":{"input_tokens":9,"output_tokens":1,"service_tier":"priority"}}`
	if u, ok := ParseUsage(KindMessages, []byte(msg)); !ok || u.ServiceTier != "" {
		t.Errorf("messages: tier %q (ok %v), want none read", u.ServiceTier, ok)
	}
}

// The shape fast path reads the tier of each answer, not the shape's: a
// priority answer shaped as a default one names priority.
func TestServedTierThroughTheShape(t *testing.T) {
	def := []byte(servedChatAnswer)
	pri := bytes.Replace(def, []byte(`"service_tier":"default"`), []byte(`"service_tier":"priority"`), 1)
	for i, step := range []struct {
		body []byte
		want string
	}{{def, "default"}, {def, "default"}, {pri, "priority"}, {def, "default"}, {pri, "priority"}} {
		if u, ok := parseChatUsage(step.body, 0); !ok || u.ServiceTier != step.want {
			t.Errorf("step %d: tier %q (ok %v), want %q", i, u.ServiceTier, ok, step.want)
		}
	}
}

// An answer naming its tier twice is read both ways: readings that differ
// name TierUnread (the dearest), alike ones the tier.
func TestServedTierNamedTwice(t *testing.T) {
	w := testWeigher(t)
	for _, c := range []struct{ tiers, want string }{
		{`"service_tier":"default","service_tier":"priority"`, spec.TierUnread},
		{`"service_tier":"priority","service_tier":"default"`, spec.TierUnread},
		{`"service_tier":"priority","service_tier":"priority"`, "priority"},
		{`"service_tier":null,"service_tier":"priority"`, "priority"},
	} {
		for _, k := range []Kind{KindChat, KindResponses} {
			body := `{"id":"c",` + c.tiers + `,"choices":[],"output":[],"usage":{"prompt_tokens":9,"completion_tokens":1,"input_tokens":9,"output_tokens":1}}`
			u, ok := w.ParseUsage(k, []byte(body), &Estimate{Model: "gpt-5"})
			if !ok || u.ServiceTier != c.want {
				t.Errorf("%v %s: tier %q (ok %v), want %q", k, c.tiers, u.ServiceTier, ok, c.want)
			}
		}
	}
}

// A stream carries the tier its events name: each chat chunk (read in full
// or against a skeleton: a chunk naming another tier than the skeleton's
// is never taken for it), a Responses terminal event (not
// response.created's "auto"); chunks that disagree name TierUnread; a
// Messages stream names none.
func TestServedTierStream(t *testing.T) {
	w := testWeigher(t)
	chunk := func(tier, word string) []byte {
		return []byte(`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-5","service_tier":"` + tier + `","choices":[{"index":0,"delta":{"content":"` + word + `"},"finish_reason":null}]}`)
	}
	usage := func(tier string) []byte {
		return []byte(`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-5","service_tier":"` + tier + `","choices":[],"usage":{"prompt_tokens":9,"completion_tokens":3}}`)
	}
	created := func(tier string) []byte {
		return []byte(`{"type":"response.created","response":{"id":"r","status":"in_progress","service_tier":"` + tier + `","output":[]}}`)
	}
	done := func(tier string) []byte {
		return []byte(`{"type":"response.completed","response":{"id":"r","status":"completed","service_tier":"` + tier + `","output":[],"usage":{"input_tokens":9,"output_tokens":3}}}`)
	}
	for _, c := range []struct {
		name   string
		kind   Kind
		events [][]byte
		want   string
	}{
		{"chat priority", KindChat, [][]byte{chunk("priority", "a"), chunk("priority", "b"), chunk("priority", "c"), usage("priority"), []byte("[DONE]")}, "priority"},
		{"chat priority, no usage", KindChat, [][]byte{chunk("priority", "a"), chunk("priority", "b")}, "priority"},
		{"chat default", KindChat, [][]byte{chunk("default", "a"), chunk("default", "b"), usage("default")}, "default"},
		{"chat tier changes past the skeleton", KindChat, [][]byte{chunk("default", "a"), chunk("default", "b"), chunk("priority", "c"), chunk("default", "d")}, spec.TierUnread},
		{"chat usage chunk names another", KindChat, [][]byte{chunk("default", "a"), chunk("default", "b"), usage("priority")}, spec.TierUnread},
		{"chat none", KindChat, [][]byte{[]byte(`{"choices":[{"delta":{"content":"a"}}]}`)}, ""},
		{"responses auto, then priority", KindResponses, [][]byte{created("auto"), done("priority")}, "priority"},
		{"responses auto, then default", KindResponses, [][]byte{created("auto"), done("default")}, "default"},
		{"responses named twice", KindResponses, [][]byte{[]byte(`{"type":"response.completed","response":{"service_tier":"default","service_tier":"priority","output":[],"usage":{"input_tokens":9,"output_tokens":3}}}`)}, spec.TierUnread},
		{"messages", KindMessages, [][]byte{[]byte(`{"type":"message_start","message":{"usage":{"input_tokens":9,"output_tokens":1,"service_tier":"priority"}}}`)}, ""},
	} {
		for _, shared := range []bool{false, true} {
			s := NewStream(c.kind)
			if shared {
				s = w.NewStream(c.kind)
			}
			for _, e := range c.events {
				s.Event(nil, e)
			}
			if got := s.Usage().Usage.ServiceTier; got != c.want {
				t.Errorf("%s (shared %v): Usage tier %q, want %q", c.name, shared, got, c.want)
			}
			if u, src := s.Settle(Estimate{InputTokens: 9}, 3); u.ServiceTier != c.want {
				t.Errorf("%s (shared %v): settled (%v) at tier %q, want %q", c.name, shared, src, u.ServiceTier, c.want)
			}
		}
	}
}

// A known tier costs no allocation; a hostile one (huge, escaped) at most
// one copy of MaxServiceTierBytes, never one of its own size.
func TestServedTierAllocations(t *testing.T) {
	huge := `"` + strings.Repeat(`\u0070`, 1<<16) + `"`
	for _, c := range []struct {
		raw  string
		most float64
	}{{`"priority"`, 0}, {`"default"`, 0}, {`null`, 0}, {huge, 0}, {`"` + strings.Repeat("p", 1<<16) + `"`, 0}, {`"on_demand"`, 0}, {`"performance"`, 1}} {
		if n := testing.AllocsPerRun(20, func() { servedTier(c.raw) }); n > c.most {
			t.Errorf("servedTier(%.20q): %v allocations, want at most %v", c.raw, n, c.most)
		}
	}
}

// FuzzServedTier holds servedTier to its reference on any member value,
// and to its bounds: "" , TierUnread or a name of at most
// MaxServiceTierBytes.
func FuzzServedTier(f *testing.F) {
	for _, c := range tierCases {
		if c.member != "" && len(c.member) < 300 {
			f.Add([]byte(strings.TrimSuffix(strings.TrimPrefix(c.member, `"service_tier":`), ",")))
		}
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		doc := append(append([]byte(`{"service_tier":`), raw...), '}')
		if !gjson.ValidBytes(doc) {
			return
		}
		v := gjson.GetBytes(doc, "service_tier")
		got := servedTier(strings.TrimSpace(v.Raw))
		if want := servedTierGJSON(v); got != want {
			t.Fatalf("servedTier(%q) = %q, want %q", v.Raw, got, want)
		}
		if len(got) > spec.MaxServiceTierBytes {
			t.Fatalf("servedTier(%q) kept %d bytes", v.Raw, len(got))
		}
	})
}
