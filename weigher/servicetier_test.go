package weigher

import (
	"strings"
	"testing"
)

// Chat and Responses bodies carry their service_tier to the estimate, for
// pricing; a value that is not a short string is dropped.
func TestServiceTierIsRead(t *testing.T) {
	w := testWeigher(t)
	long := strings.Repeat("p", 33)
	for _, tc := range []struct {
		name string
		est  Estimate
		want string
	}{
		{"chat priority", w.Chat([]byte(`{"model":"gpt-5","service_tier":"priority","messages":[]}`)), "priority"},
		{"chat flex", w.Chat([]byte(`{"service_tier":"flex","model":"gpt-5","messages":[]}`)), "flex"},
		{"chat none", w.Chat([]byte(`{"model":"gpt-5","messages":[]}`)), ""},
		{"chat not a string", w.Chat([]byte(`{"model":"gpt-5","service_tier":1,"messages":[]}`)), ""},
		{"chat too long", w.Chat([]byte(`{"model":"gpt-5","service_tier":"` + long + `","messages":[]}`)), ""},
		{"responses priority", w.Responses([]byte(`{"model":"gpt-5","service_tier":"priority","input":"hi"}`)), "priority"},
		{"responses auto", w.Responses([]byte(`{"model":"gpt-5","service_tier":"auto","input":"hi"}`)), "auto"},
		{"as the served model", w.WeighAs(KindChat, []byte(`{"model":"d","service_tier":"flex","messages":[]}`), "gpt-5"), "flex"},
	} {
		if tc.est.ServiceTier != tc.want {
			t.Errorf("%s: service tier %q, want %q", tc.name, tc.est.ServiceTier, tc.want)
		}
	}
}
