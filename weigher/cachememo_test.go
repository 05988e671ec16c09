package weigher

import (
	"fmt"
	"strings"
	"testing"
)

// TestElementHasOneEntry: a chat message both field-checked and counted
// is remembered in one cache entry (its check's mark and its count), so a
// warm request looks it up once; a conversation of n messages long enough
// to be cached leaves n entries, not 2n.
func TestElementHasOneEntry(t *testing.T) {
	for _, kind := range []Kind{KindChat, KindMessages, KindResponses} {
		w := cachedWeigher(t, 1<<20)
		const n = 12
		var msgs []string
		for i := range n {
			role := [...]string{"user", "assistant"}[i%2]
			msgs = append(msgs, fmt.Sprintf(`{"role":%q,"content":"message %d of a conversation, long enough to be remembered by the count cache"}`, role, i))
		}
		var body string
		switch kind {
		case KindChat:
			body = `{"model":"gpt-4o","messages":[` + strings.Join(msgs, ",") + `]}`
		case KindMessages:
			body = `{"model":"claude-sonnet-4-5","max_tokens":10,"messages":[` + strings.Join(msgs, ",") + `]}`
		case KindResponses:
			body = `{"model":"gpt-4o","input":[` + strings.Join(msgs, ",") + `]}`
		}
		first := w.Weigh(kind, []byte(body))
		if got := w.cache.c.Load().Len(); got != n {
			t.Errorf("%v: %d messages left %d cache entries, want one each", kind, n, got)
		}
		before := w.CacheStats()
		if again := w.Weigh(kind, []byte(body)); again != first {
			t.Errorf("%v: warm estimate %+v, cold %+v", kind, again, first)
		}
		if s := w.CacheStats(); s.Hits-before.Hits != n || s.Misses != before.Misses {
			t.Errorf("%v: warm request: %d hits, %d misses; want %d and 0", kind, s.Hits-before.Hits, s.Misses-before.Misses, n)
		}
	}
}

// TestMarkIsPerFieldsContext: a message found fine as a chat message is not
// thereby fine as a Responses input item, whose fields differ ("Input" is
// the item's field "input" in another case, and nothing a chat message
// reads): the same bytes are checked again in the other context, and
// refused there, however often they passed as a chat message.
func TestMarkIsPerFieldsContext(t *testing.T) {
	w := cachedWeigher(t, 1<<20)
	msg := `{"role":"user","content":"a message long enough to be remembered by the count cache","Input":"x"}`
	chat := []byte(`{"model":"gpt-4o","messages":[` + msg + `]}`)
	responses := []byte(`{"model":"gpt-4o","input":[` + msg + `]}`)
	for range 2 {
		if e := w.Chat(chat); !e.Parsed {
			t.Fatalf("chat message refused: %+v", e)
		}
	}
	for i := range 2 {
		if e := w.Weigh(KindResponses, responses); e.Parsed || e.Fault != FaultCaseVariantKey {
			t.Fatalf("responses item with \"Input\", request %d: %+v, want refused (%s)", i, e, FaultCaseVariantKey)
		}
	}
}

// TestRefusedElementIsNotRemembered: an element that fails the field check
// leaves no mark, on the first request or any later one; its siblings'
// marks do not stand for it.
func TestRefusedElementIsNotRemembered(t *testing.T) {
	w := cachedWeigher(t, 1<<20)
	good := `{"role":"user","content":"a fine message, long enough to be remembered by the count cache"}`
	bad := `{"role":"user","Content":"a message with a case-variant key, long enough to be remembered"}`
	body := []byte(`{"model":"gpt-4o","messages":[` + good + `,` + bad + `]}`)
	for i := range 3 {
		if e := w.Chat(body); e.Parsed || e.Fault != FaultCaseVariantKey {
			t.Fatalf("request %d: %+v, want refused (%s)", i, e, FaultCaseVariantKey)
		}
	}
	if e := w.Chat([]byte(`{"model":"gpt-4o","messages":[` + bad + `]}`)); e.Parsed {
		t.Fatalf("the refused message alone: %+v, want refused", e)
	}
}

// TestOneEntryAcrossModels: the same conversation weighed for models of
// different encodings, in turns, gets each model's own count (the entry's
// count context is checked), equal to an uncached weigher's.
func TestOneEntryAcrossModels(t *testing.T) {
	w, cold := cachedWeigher(t, 1<<20), uncached(t)
	bodies := growingBodies(t, "gpt-4o", 7, 16<<10)
	for i, b := range bodies {
		for _, model := range []string{"gpt-4o", "gpt-4", "gpt-4o"} {
			body := []byte(strings.Replace(string(b), `"model":"gpt-4o"`, `"model":"`+model+`"`, 1))
			if got, want := w.Chat(body), cold.Chat(body); got != want {
				t.Fatalf("body %d as %s: cached %+v, uncached %+v", i, model, got, want)
			}
		}
	}
}

// TestToolListHasOneEntry: a list of tool definitions, counted as a whole,
// is remembered as one entry holding its field check's mark and its count,
// not one mark per tool besides: a warm request looks it up once.
func TestToolListHasOneEntry(t *testing.T) {
	tool := func(i int) string {
		return fmt.Sprintf(`{"type":"function","function":{"name":"tool_%d","description":"a tool long enough to be remembered","parameters":{"type":"object","properties":{"q":{"type":"string","description":"the query"}}}}}`, i)
	}
	anthropicTool := func(i int) string {
		return fmt.Sprintf(`{"name":"tool_%d","description":"a tool long enough to be remembered","input_schema":{"type":"object","properties":{"q":{"type":"string"}}}}`, i)
	}
	var tools, claude []string
	for i := range 4 {
		tools, claude = append(tools, tool(i)), append(claude, anthropicTool(i))
	}
	for _, c := range []struct {
		kind Kind
		body string
	}{
		{KindChat, `{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}],"tools":[` + strings.Join(tools, ",") + `]}`},
		{KindChat, `{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}],"functions":[` + strings.Join(tools, ",") + `]}`},
		{KindResponses, `{"model":"gpt-4o","input":"hi","tools":[` + strings.Join(tools, ",") + `]}`},
		{KindMessages, `{"model":"claude-sonnet-4-5","max_tokens":10,"messages":[{"role":"user","content":"hi"}],"tools":[` + strings.Join(claude, ",") + `]}`},
	} {
		w, cold := cachedWeigher(t, 1<<20), uncached(t)
		first := w.Weigh(c.kind, []byte(c.body))
		if want := cold.Weigh(c.kind, []byte(c.body)); first != want {
			t.Fatalf("%v: cached %+v, uncached %+v", c.kind, first, want)
		}
		if got := w.cache.c.Load().Len(); got != 1 {
			t.Errorf("%v: a list of 4 tools left %d cache entries, want 1", c.kind, got)
		}
		before := w.CacheStats()
		if again := w.Weigh(c.kind, []byte(c.body)); again != first {
			t.Errorf("%v: warm estimate %+v, cold %+v", c.kind, again, first)
		}
		if s := w.CacheStats(); s.Hits-before.Hits != 1 || s.Misses != before.Misses {
			t.Errorf("%v: warm request: %d hits, %d misses; want 1 and 0", c.kind, s.Hits-before.Hits, s.Misses-before.Misses)
		}
	}
}

// TestToolListMarkIsTheWholeList: a list of tools found fine does not
// vouch for another list holding the same tools and one with a case-variant
// key: the new list is checked, and refused, every time.
func TestToolListMarkIsTheWholeList(t *testing.T) {
	w := cachedWeigher(t, 1<<20)
	good := `{"type":"function","function":{"name":"search","description":"a tool long enough to be remembered","parameters":{"type":"object","properties":{}}}}`
	bad := `{"type":"function","function":{"name":"fetch","Description":"a tool with a case-variant key in it","parameters":{"type":"object","properties":{}}}}`
	for range 2 {
		if e := w.Chat([]byte(`{"model":"gpt-4o","messages":[],"tools":[` + good + `]}`)); !e.Parsed {
			t.Fatalf("fine tools refused: %+v", e)
		}
	}
	for i := range 2 {
		if e := w.Chat([]byte(`{"model":"gpt-4o","messages":[],"tools":[` + good + `,` + bad + `]}`)); e.Parsed || e.Fault != FaultCaseVariantKey {
			t.Fatalf("request %d with a case-variant tool: %+v, want refused (%s)", i, e, FaultCaseVariantKey)
		}
	}
}

// TestNestedObjectsAreNotMarked: a new message is remembered as one entry
// (its mark and count); the tool calls and content parts inside it, long
// enough to be cached, are checked but not written to the cache; the
// message, resent, is found whole, and a case-variant key nested in a new
// message is still refused.
func TestNestedObjectsAreNotMarked(t *testing.T) {
	w := cachedWeigher(t, 1<<20)
	call := func(id string) string {
		return `{"id":"` + id + `","type":"function","function":{"name":"search_docs","arguments":"{\"query\": \"a query long enough to cache\"}"}}`
	}
	msg := `{"role":"assistant","content":[{"type":"text","text":"a content part long enough to be remembered by the cache"}],"tool_calls":[` + call("call_1") + `,` + call("call_2") + `]}`
	body := []byte(`{"model":"gpt-4o","messages":[` + msg + `]}`)
	first := w.Chat(body)
	if !first.Parsed {
		t.Fatalf("refused: %+v", first)
	}
	if n := w.CacheStats().Entries; n != 1 {
		t.Errorf("step 1 (new message): %d cache entries, want 1 (the message alone)", n)
	}
	if again := w.Chat(body); again != first {
		t.Errorf("step 2 (resent): %+v, want %+v", again, first)
	}
	if s := w.CacheStats(); s.Hits != 1 {
		t.Errorf("step 2 (resent): %d hits, want 1", s.Hits)
	}
	bad := strings.Replace(msg, `"search_docs"`, `"search_docs","Arguments":"x"`, 1)
	if e := w.Chat([]byte(`{"model":"gpt-4o","messages":[` + msg + `,` + bad + `]}`)); e.Parsed || e.Fault != FaultCaseVariantKey {
		t.Errorf("step 3 (nested case variant in a new message): %+v, want refused (%s)", e, FaultCaseVariantKey)
	}
}
