package weigher

import (
	"encoding/json"
	"strings"
	"testing"
)

// A chat or Messages body that names "cache_control" (escaped or not) asks
// for cache writes, and "1h" for the 1-hour TTL; other bodies do not.
func TestAsksCache(t *testing.T) {
	w := testWeigher(t)
	for _, c := range []struct {
		kind           Kind
		body           string
		asked, asked1h bool
	}{
		{KindMessages, `{"model":"claude-opus-4-7","max_tokens":10,"system":[{"type":"text","text":"s","cache_control":{"type":"ephemeral","ttl":"1h"}}],"messages":[{"role":"user","content":"hi"}]}`, true, true},
		{KindMessages, `{"model":"claude-opus-4-7","max_tokens":10,"system":[{"type":"text","text":"s","cache_control":{"type":"ephemeral"}}],"messages":[{"role":"user","content":"hi"}]}`, true, false},
		{KindMessages, `{"model":"claude-opus-4-7","max_tokens":10,"cache_control":{"type":"ephemeral","ttl":"5m"},"messages":[{"role":"user","content":"1h"}]}`, true, true},
		{KindMessages, `{"model":"claude-opus-4-7","max_tokens":10,"messages":[{"role":"user","content":[{"type":"text","text":"hi","cache\u005fcontrol":{"type":"ephemeral","ttl":"\u0031h"}}]}]}`, true, true},
		{KindMessages, `{"model":"claude-opus-4-7","max_tokens":10,"messages":[{"role":"user","content":"caf\u00e9 \"1h\""}]}`, false, false},
		{KindMessages, `{"model":"claude-opus-4-7","max_tokens":10,"messages":[{"role":"user","content":"the words \"cache_control\" and 1h"}]}`, false, false},
		{KindChat, `{"model":"anthropic/claude-opus-4.7","messages":[{"role":"user","content":[{"type":"text","text":"hi","cache_control":{"type":"ephemeral","ttl":"1h"}}]}]}`, true, true},
		{KindChat, `{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}`, false, false},
		// OpenAI writes its cache for free: an OpenAI model's cache_control
		// (which OpenAI ignores) prices nothing more.
		{KindChat, `{"model":"openai/gpt-4o","messages":[{"role":"user","content":[{"type":"text","text":"hi","cache_control":{"type":"ephemeral","ttl":"1h"}}]}]}`, false, false},
		// LiteLLM adds cache_control where the injection points say.
		{KindChat, `{"model":"anthropic/claude-opus-4.7","cache_control_injection_points":[{"location":"message","role":"system"}],"messages":[{"role":"system","content":"s"},{"role":"user","content":"hi"}]}`, true, false},
	} {
		e := w.Weigh(c.kind, []byte(c.body))
		if !e.Parsed || e.CacheWrite != c.asked || e.CacheWrite1h != c.asked1h {
			t.Errorf("%s: parsed %v, cache write %v, 1h %v; want %v, %v", c.body, e.Parsed, e.CacheWrite, e.CacheWrite1h, c.asked, c.asked1h)
		}
	}
}

// FuzzAsksCache compares asksCache with encoding/json's reading of every
// string of a valid JSON body: it may find more, never less.
func FuzzAsksCache(f *testing.F) {
	f.Add(`{"a":"cache_control","b":"1h"}`)
	f.Add(`{"cache\u005fcontrol":{"ttl":"\u0031h"}}`)
	f.Add(`{"m":[{"c":"x\"cache_control\"","ttl":"1h"}]}`)
	f.Fuzz(func(t *testing.T, body string) {
		var v any
		if !json.Valid([]byte(body)) || json.Unmarshal([]byte(body), &v) != nil {
			return
		}
		asked, oneHour := asksCache(body)
		var hasCC, has1h bool
		var walk func(any)
		walk = func(v any) {
			switch x := v.(type) {
			case string:
				hasCC = hasCC || x == "cache_control"
				has1h = has1h || x == "1h"
			case []any:
				for _, e := range x {
					walk(e)
				}
			case map[string]any:
				for k, e := range x {
					walk(k)
					walk(e)
				}
			}
		}
		walk(v)
		if hasCC && !asked || hasCC && has1h && !oneHour || oneHour && !asked {
			t.Fatalf("%q: asksCache %v %v, strings %v %v", body, asked, oneHour, hasCC, has1h)
		}
	})
}

// Each of the two strings may be escaped while the other is not.
func TestAsksCacheMixedEscapes(t *testing.T) {
	for _, c := range []struct {
		body           string
		asked, oneHour bool
	}{
		{`{"cache\u005fcontrol":{"ttl":"1h"}}`, true, true},
		{`{"cache_control":{"ttl":"\u0031h"}}`, true, true},
		{`{"cache\u005fcontrol":{"ttl":"5m"},"t":"\u00e9"}`, true, false},
		{`{"a":"\u0031h","b":"cache_control"}`, true, true},
		{`{"a":"x\"cache\u005fcontrol"}`, false, false},
		{`{"a":"\\u0031h"}`, false, false},
	} {
		if a, h := asksCache(c.body); a != c.asked || h != c.oneHour {
			t.Errorf("%s: %v %v, want %v %v", c.body, a, h, c.asked, c.oneHour)
		}
	}
}

// namesCacheControl is the two plain searches it replaces.
func FuzzNamesCacheControl(f *testing.F) {
	for _, s := range []string{`{"cache_control":{}}`, `{"cache_control_injection_points":[]}`, `"cache_controlx"`, `_"cache_control"`, `cache_control"`, `"cache_control_injection_points`, `__"cache__control"`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		want := strings.Contains(body, `"cache_control"`) || strings.Contains(body, `"cache_control_injection_points"`)
		if got := namesCacheControl(body); got != want {
			t.Errorf("namesCacheControl(%q) = %v, want %v", body, got, want)
		}
	})
}
