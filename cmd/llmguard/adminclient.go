package main

import (
	"crypto/tls"
	"crypto/x509"
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

func readSmall(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxPEMFile+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxPEMFile {
		return nil, fmt.Errorf("%s: larger than %d bytes", path, maxPEMFile)
	}
	return b, nil
}

// unauthorizedHint explains a 401 from the admin listener when the token
// the command sent came from an unset variable: "" otherwise.
func unauthorizedHint(status int, tokenEnv string) string {
	if status != http.StatusUnauthorized {
		return ""
	}
	if tokenEnv == "" {
		return " (no admin token sent: set admin_token_env in the config, or --token-env, to the variable holding it)"
	}
	if os.Getenv(tokenEnv) == "" {
		return fmt.Sprintf(" (the token is read from $%s, which is unset or empty in this shell)", tokenEnv)
	}
	return fmt.Sprintf(" (the token in $%s is not the one the node was started with)", tokenEnv)
}
