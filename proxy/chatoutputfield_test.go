package proxy

import "testing"

// chatOutputFieldOf: max_completion_tokens for OpenAI's own API and Azure
// OpenAI, whose reasoning models refuse max_tokens; max_tokens for every
// other server (Ollama, llama.cpp and TabbyAPI read no
// max_completion_tokens); the configured field whatever the host.
func TestChatOutputFieldDefaults(t *testing.T) {
	for _, c := range []struct {
		flavor         Flavor
		baseURL, field string
		want           string
	}{
		{FlavorOpenAI, "https://api.openai.com", "", "max_completion_tokens"},
		{FlavorOpenAI, "https://API.OpenAI.com:443/v1", "", "max_completion_tokens"},
		{FlavorOpenAI, "https://api.openai.com./v1", "", "max_completion_tokens"},
		{FlavorAzure, "https://my-gateway.example.com", "", "max_completion_tokens"},
		{FlavorOpenAI, "https://res.openai.azure.com/openai/v1", "", "max_completion_tokens"},
		{FlavorOpenAI, "http://127.0.0.1:11434", "", "max_tokens"},
		{FlavorOpenAI, "https://openrouter.ai/api", "", "max_tokens"},
		{FlavorOpenAI, "https://api.openai.com.evil.example", "", "max_tokens"},
		{FlavorOpenAI, "https://eu.api.openai.com/v1", "", "max_completion_tokens"}, // data residency
		{FlavorOpenAI, "https://US.api.openai.com.", "", "max_completion_tokens"},
		{FlavorOpenAI, "https://evil-api.openai.com.example", "", "max_tokens"},
		{FlavorOpenAI, "http://127.0.0.1:11434", "max_completion_tokens", "max_completion_tokens"},
		{FlavorOpenAI, "https://api.openai.com", "max_tokens", "max_tokens"},
	} {
		u := &Upstream{Name: "u", Flavor: c.flavor, BaseURL: c.baseURL, ChatOutputField: c.field}
		if err := u.init(); err != nil {
			t.Fatalf("%s: %v", c.baseURL, err)
		}
		if u.chatOutputField != c.want {
			t.Errorf("%v %s (configured %q): %q, want %q", c.flavor, c.baseURL, c.field, u.chatOutputField, c.want)
		}
	}
	u := &Upstream{Name: "u", Flavor: FlavorOpenAI, BaseURL: "http://127.0.0.1", ChatOutputField: "max_output_tokens"}
	if err := u.init(); err == nil {
		t.Error("chat output field max_output_tokens: no error")
	}
}
