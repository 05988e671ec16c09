package app

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/llmguard/llmguard/config"
	"github.com/llmguard/llmguard/internal/redistest"
)

// The admin API refuses hostile requests with a status and a message, and
// creates nothing: bodies over the bound, bad JSON, unknown fields, huge
// or control-character fields, bad actors, wrong methods and ids, and
// callers without the token.
func TestKeysAdminAPIRefusesHostileInput(t *testing.T) {
	srv := redistest.Shared(t)
	store := fmt.Sprintf(`{backend: redis, redis_url: "redis://%s/0", timeout: 200ms}`, srv.Addr())
	n := startKeyNodes(t, 1, func(_ int, mockURL string) string { return keyStoreConfig(t, mockURL, store, "1h") }, nil)[0]
	for _, tc := range []struct {
		name, method, path, body, actor string
		status                          int
		msg                             string
	}{
		{"body over 8 KiB", "POST", "/admin/keys", `{"tenant":"` + strings.Repeat("a", 9000) + `"}`, "", 413, "over 8192 bytes"},
		{"bad JSON", "POST", "/admin/keys", `{"tenant":`, "", 400, "not valid JSON"},
		{"unknown field", "POST", "/admin/keys", `{"tenant":"acme","secret":"sk-mine"}`, "", 400, `unknown field \"secret\"`},
		{"huge field", "POST", "/admin/keys", `{"tenant":"acme","user":"` + strings.Repeat("u", 4000) + `"}`, "", 400, "more than 128"},
		{"control character", "POST", "/admin/keys", `{"tenant":"ac\u001bme"}`, "", 400, "control character"},
		{"two objects", "POST", "/admin/keys", `{"tenant":"a"}{"tenant":"b"}`, "", 400, "one JSON object"},
		{"array", "POST", "/admin/keys", `[{"tenant":"a"}]`, "", 400, "JSON object"},
		{"no tenant", "POST", "/admin/keys", `{}`, "", 400, "tenant is required"},
		{"past expiry", "POST", "/admin/keys", `{"tenant":"a","expires_at":"2000-01-01T00:00:00Z"}`, "", 400, "not after now"},
		{"huge actor", "POST", "/admin/keys", `{"tenant":"a"}`, strings.Repeat("x", 200), 400, "more than 128"},
		{"bad rotate body", "POST", "/admin/keys/0123456789abcdef/rotate", `{"grace":"forever"}`, "", 400, "grace must be"},
		{"unknown key", "GET", "/admin/keys/0123456789abcdef", "", "", 404, "no such key"},
		{"malformed id", "GET", "/admin/keys/NOT-AN-ID", "", "", 404, "16 lowercase hex"},
		{"revoke unknown", "DELETE", "/admin/keys/0123456789abcdef", "", "", 404, "no such key"},
		{"wrong method", "PUT", "/admin/keys/0123456789abcdef", "", "", 405, "not allowed"},
		{"unknown action", "POST", "/admin/keys/0123456789abcdef/enable", "", "", 404, "no such endpoint"},
		{"bad status filter", "GET", "/admin/keys?status=everything", "", "", 400, "status must be"},
	} {
		st, body := n.adminCall(tc.method, tc.path, tc.body, tc.actor)
		if st != tc.status || !strings.Contains(body, tc.msg) {
			t.Errorf("%s: %d %s, want %d with %q", tc.name, st, body, tc.status, tc.msg)
		}
	}
	// A body past the admin server's own bound is refused before it is
	// read whole.
	// (Announced, not sent: the answer comes before the body is read, and
	// a client still writing it would see its connection reset.)
	conn, err := net.Dial("tcp", strings.TrimPrefix(n.admin, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(conn, "POST /admin/keys HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", keysAdminToken, 2<<20)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil || resp.StatusCode != 413 {
		t.Errorf("a 2 MiB body: %v %v, want 413", resp, err)
	}
	// Without the token, or with another: 401, nothing served.
	for _, auth := range []string{"", "Bearer wrong", "Bearer " + keysAdminToken + "x"} {
		req, _ := http.NewRequest("POST", n.admin+"/admin/keys", strings.NewReader(`{"tenant":"acme"}`))
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 401 || strings.Contains(string(b), "secret") {
			t.Errorf("auth %q: %d %s", auth, resp.StatusCode, b)
		}
	}
	if st, body := n.adminCall("GET", "/admin/keys", "", ""); st != 200 || !strings.Contains(body, `"keys": []`) {
		t.Errorf("after the refusals the registry is not empty: %d %s", st, body)
	}
}

// With the memory store there is no key store: /admin/keys answers 501
// saying keys live in the file, and the file's keys work as ever.
func TestKeysMemoryStoreAnswers501(t *testing.T) {
	h := start(t, "")
	for _, m := range []string{"GET", "POST"} {
		req, _ := http.NewRequest(m, h.admin+"/admin/keys", strings.NewReader(`{"tenant":"acme"}`))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 501 || !strings.Contains(string(b), "memory store, keys live in the config file") {
			t.Errorf("%s /admin/keys: %d %s", m, resp.StatusCode, b)
		}
	}
	if resp, body := h.post(testKey, hiBody); resp.StatusCode != 200 {
		t.Errorf("file key: %d %s", resp.StatusCode, body)
	}
}

// With the key store on, a plans, tenants or users matcher no file key has
// is not reported as matching nobody: a stored key may have it.
func TestKeysStoreSilencesUnknownMatcherWarnings(t *testing.T) {
	const y = `
upstreams: [{name: u, flavor: openai, base_url: "http://127.0.0.1:1", no_key: true}]
keys: [{key: sk-a, user: alice, tenant: acme, plan: free}]
limits: [{name: pro-tpm, scope: user, unit: tokens, rate: 1000, per: 1m, plans: [pro]}]
store: {backend: redis, redis_url: "redis://127.0.0.1:1/0"}
`
	for _, tc := range []struct {
		tail string
		warn bool
	}{{"", true}, {"key_store: {enabled: true}\n", false}} {
		cfg, err := config.Parse([]byte(y + tc.tail))
		if err != nil {
			t.Fatal(err)
		}
		findings, err := CheckConfig(cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		warned := false
		for _, f := range findings {
			warned = warned || strings.Contains(f.Message, `no key has plan "pro"`)
		}
		if warned != tc.warn {
			t.Errorf("%q: warned %v, want %v: %v", tc.tail, warned, tc.warn, findings)
		}
	}
}
