package main

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/llmguard/llmguard/config"
)

// adminTarget is how a CLI command (usage, keys) reaches a running
// llmguard's admin listener: its base URL ("http://host:port" or
// "https://host:port") and an HTTP client trusting its certificate.
type adminTarget struct {
	base   string
	client *http.Client
}

// maxPEMFile bounds a CA file read by --admin-ca, in bytes.
const maxPEMFile = 1 << 20

// newAdminTarget resolves where to send admin requests. addr is the
// --admin flag ("host:port", or a URL "https://host:port"), else cfg's
// admin_listen. The scheme is https when addr says so or cfg has
// admin_tls. An https target is verified against the system's roots, plus
// caFile (--admin-ca) when given, else plus the admin_tls certificate file
// itself when it is readable here (a self-signed certificate then works on
// the node that serves it). A listen address on every interface
// (0.0.0.0, [::]) is asked on loopback. Errors: no address; caFile
// unreadable or holding no certificate.
func newAdminTarget(cfg *config.Config, addr, caFile string) (adminTarget, error) {
	scheme := "http"
	if cfg != nil && cfg.AdminTLS != nil {
		scheme = "https"
	}
	if addr == "" && cfg != nil {
		addr = cfg.AdminListen
	}
	if s, rest, ok := strings.Cut(addr, "://"); ok {
		scheme, addr = strings.ToLower(s), strings.TrimSuffix(rest, "/")
	}
	if addr == "" {
		return adminTarget{}, fmt.Errorf("give --config (the running llmguard's config) or --admin host:port")
	}
	if scheme != "http" && scheme != "https" {
		return adminTarget{}, fmt.Errorf("--admin: scheme %q: want http or https", scheme)
	}
	if host, port, err := net.SplitHostPort(addr); err == nil {
		if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
			addr = net.JoinHostPort("127.0.0.1", port)
		}
	}
	t := adminTarget{base: scheme + "://" + addr, client: &http.Client{Timeout: 30 * time.Second}}
	if scheme == "http" {
		return t, nil
	}
	pool, err := x509.SystemCertPool()
	if err != nil || pool == nil {
		pool = x509.NewCertPool()
	}
	switch {
	case caFile != "":
		b, err := readSmall(caFile)
		if err != nil {
			return adminTarget{}, fmt.Errorf("--admin-ca: %w", err)
		}
		if !pool.AppendCertsFromPEM(b) {
			return adminTarget{}, fmt.Errorf("--admin-ca %s: no PEM certificate in it", caFile)
		}
	case cfg != nil && cfg.AdminTLS != nil:
		if b, err := readSmall(cfg.AdminTLS.CertFile); err == nil {
			pool.AppendCertsFromPEM(b)
		}
	}
	t.client.Transport = &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}
	return t, nil
}

func readSmall(path string) ([]byte, error) { return config.ReadFile(path, maxPEMFile) }

// maxAdminAnswer bounds the admin listener's answer a command reads, in
// bytes.
const maxAdminAnswer = 64 << 20

// do sends one request to the admin listener (path with its query; body
// nil or JSON) with the bearer token read from the variable tokenEnv (none
// when ""), and returns the body of a 2xx answer. header adds fields.
// Errors, prefixed with cmd: the listener cannot be reached; an answer over
// maxAdminAnswer; a non-2xx answer, with its message (the "error" of a JSON
// body, else the body) and why a 401 may have happened.
func (t adminTarget) do(cmd, method, path string, body []byte, tokenEnv string, header map[string]string) ([]byte, error) {
	b, _, err := t.doHeader(cmd, method, path, body, tokenEnv, header)
	return b, err
}

// doHeader is do that also returns the answer's header fields (nil on an
// error).
func (t adminTarget) doHeader(cmd, method, path string, body []byte, tokenEnv string, header map[string]string) ([]byte, http.Header, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, t.base+path, rd)
	if err != nil {
		return nil, nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if tokenEnv != "" {
		req.Header.Set("Authorization", "Bearer "+os.Getenv(tokenEnv))
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := t.client.Do(req)
	if err != nil {
		// A node started with serve --admin-listen listens where its
		// config does not say: name the flag that reaches it.
		return nil, nil, fmt.Errorf("%s: is llmguard running, with its admin listener at %s? (one started with serve --admin-listen: pass that address as --admin host:port) %w", cmd, t.base, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxAdminAnswer+1))
	if err != nil {
		return nil, nil, err
	}
	if len(b) > maxAdminAnswer {
		return nil, nil, fmt.Errorf("%s: %s answered more than %d bytes", cmd, t.base, maxAdminAnswer)
	}
	if resp.StatusCode/100 != 2 {
		msg := strings.TrimSpace(string(b))
		var e struct{ Error string }
		if json.Unmarshal(b, &e) == nil && e.Error != "" {
			msg = e.Error
		}
		return nil, nil, fmt.Errorf("%s: %s answered %s: %s%s", cmd, t.base, resp.Status, msg, unauthorizedHint(resp.StatusCode, tokenEnv))
	}
	return b, resp.Header, nil
}

// unauthorizedHint explains a 401 from the admin listener: no token sent,
// its variable unset here, or a token the node does not take; "" for
// another status. When a token was sent from a set variable, or none at
// all, the node at the address may also be another llmguard, started with
// another config (trial20: usage --config a.yaml at an address where the
// node of b.yaml, with admin_token_env, listened was told only to set
// admin_token_env in a.yaml).
func unauthorizedHint(status int, tokenEnv string) string {
	const other = "; or the llmguard at this address runs another config: --admin host:port names the right one"
	if status != http.StatusUnauthorized {
		return ""
	}
	if tokenEnv == "" {
		return " (no admin token sent: set admin_token_env in the config, or --token-env, to the variable holding it" + other + ")"
	}
	if os.Getenv(tokenEnv) == "" {
		return fmt.Sprintf(" (the token is read from $%s, which is unset or empty in this shell)", tokenEnv)
	}
	return fmt.Sprintf(" (the token in $%s is not the one the node was started with%s)", tokenEnv, other)
}
