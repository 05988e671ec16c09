package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// selfSigned writes a self-signed certificate for 127.0.0.1 and its key.
func selfSigned(t *testing.T, dir string) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(7), Subject: pkix.Name{CommonName: "llmguard admin"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(90 * 24 * time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, IsCA: true, BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, _ := x509.MarshalECPrivateKey(key)
	certFile, keyFile = filepath.Join(dir, "admin.crt"), filepath.Join(dir, "admin.key")
	os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600)
	return certFile, keyFile
}

// `llmguard usage` and `llmguard keys` reach an admin listener served
// over TLS (admin_tls): from the config (https, trusting its certificate
// file), or from --admin https://… with --admin-ca; plain --admin
// host:port (http) to it fails.
func TestAdminCommandsOverTLS(t *testing.T) {
	bin := binary(t)
	dir := t.TempDir()
	certFile, _ := selfSigned(t, dir)
	admin := freeAddr(t)
	cfg := filepath.Join(dir, "llmguard.yaml")
	os.WriteFile(cfg, []byte(`
listen: 127.0.0.1:0
admin_listen: `+admin+`
admin_tls: {cert_file: admin.crt, key_file: admin.key}
upstreams: [{name: mock, flavor: openai, base_url: "http://127.0.0.1:1", no_key: true}]
limits: [{name: rpm, scope: user, unit: requests, rate: 60, per: 1m}]
`), 0o600)
	cmd := exec.Command(bin, "serve", "--config", cfg)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	deadline := time.Now().Add(30 * time.Second) // a failure timeout
	for {
		code, out := exitCode(t, bin, "usage", "--config", cfg, "--format", "csv")
		if code == 0 {
			if !strings.HasPrefix(out, "scope,") && !strings.Contains(out, "total") {
				t.Fatalf("usage over TLS: %q", out)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("usage --config over admin_tls: exit %d %s", code, out)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// The memory store has no key store: the answer is its 501, which
	// proves the TLS request went through.
	if code, out := exitCode(t, bin, "keys", "list", "--config", cfg); code != 1 || !strings.Contains(out, "501") {
		t.Errorf("keys list over admin_tls: exit %d %s, want the 501 of the memory store", code, out)
	}
	if code, out := exitCode(t, bin, "usage", "--config", cfg, "--admin", "https://"+admin, "--admin-ca", certFile); code != 0 {
		t.Errorf("usage --admin https:// --admin-ca: exit %d %s", code, out)
	}
	if code, out := exitCode(t, bin, "keys", "list", "--admin", "https://"+admin); code == 0 || !strings.Contains(out, "certificate") {
		t.Errorf("keys list --admin https:// without a trusted CA: exit %d %s, want a certificate error", code, out)
	}
	if code, out := exitCode(t, bin, "keys", "list", "--admin", admin); code == 0 {
		t.Errorf("plain http to the TLS admin listener: exit 0 %s", out)
	}
}

// A 401 names why: no token configured, its variable unset here, or a
// token the node does not take; the first and last may also be another
// config's node at the address (trial20).
func TestUnauthorizedHint(t *testing.T) {
	t.Setenv("LLMGUARD_TEST_ADMIN_TOKEN", "")
	for _, tc := range []struct {
		status int
		env    string
		want   string
	}{
		{200, "LLMGUARD_TEST_ADMIN_TOKEN", ""},
		{401, "", "no admin token sent"},
		{401, "", "or the llmguard at this address runs another config"},
		{401, "LLMGUARD_TEST_ADMIN_TOKEN", "$LLMGUARD_TEST_ADMIN_TOKEN, which is unset or empty"},
	} {
		if got := unauthorizedHint(tc.status, tc.env); tc.want == "" && got != "" || !strings.Contains(got, tc.want) {
			t.Errorf("hint(%d, %q) = %q, want %q", tc.status, tc.env, got, tc.want)
		}
	}
	t.Setenv("LLMGUARD_TEST_ADMIN_TOKEN", "wrong")
	if got := unauthorizedHint(401, "LLMGUARD_TEST_ADMIN_TOKEN"); !strings.Contains(got, "not the one the node was started with") ||
		!strings.Contains(got, "or the llmguard at this address runs another config") {
		t.Errorf("hint with a set token = %q", got)
	}
}
