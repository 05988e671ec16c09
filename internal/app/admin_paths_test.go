package app

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// No spelling of an admin path reaches its data without the token: dot
// segments, doubled slashes, percent-encoded letters, case, ;params, the
// absolute form, a token cut short, doubled spaces or the scheme in lower
// case — each
// is answered 401 or 404 over a real socket, never 200; the token itself
// gets 200 (so the test can fail).
func TestAdminPathTricksNeedTheToken(t *testing.T) {
	t.Setenv("LLMGUARD_TEST_ADMIN_TOKEN", "s3cret")
	h := startFlavors(t, "admin_token_env: LLMGUARD_TEST_ADMIN_TOKEN\n")
	addr := strings.TrimPrefix(h.admin, "http://")
	raw := func(target, auth string) int {
		t.Helper()
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		conn.SetDeadline(time.Now().Add(10 * time.Second))
		a := ""
		if auth != "" {
			a = "Authorization: " + auth + "\r\n"
		}
		fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: x\r\n%sConnection: close\r\n\r\n", target, a)
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatalf("%s: %v", target, err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, target := range []string{
		"/admin/usage", "/admin//usage", "//admin/usage", "/admin/./usage", "/admin/x/../usage", "/metrics/../admin/usage",
		"/%61dmin/usage", "/admin/%75sage", "/admin%2fusage", "/ADMIN/usage", "/admin/usage/", "/admin/usage;x",
		"/admin/usage?tenant=acme", "http://x/admin/usage", "/admin/keys", "/admin/keys/", "/admin/keys/../keys/abc",
		"/admin/KEYS/", "/admin/keys%2f0123456789abcdef",
	} {
		for _, auth := range []string{"", "bearer s3cret", "Bearer  s3cret", "Bearer s3cre", "Basic czNjcmV0"} {
			if st := raw(target, auth); st == 200 {
				t.Errorf("%s with Authorization %q: 200 without the token", target, auth)
			}
		}
	}
	if st := raw("/admin/usage", "Bearer s3cret"); st != 200 {
		t.Errorf("the token: %d, want 200", st)
	}
}
