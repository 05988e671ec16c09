package app

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/llmguard/llmguard/config"
	"github.com/llmguard/llmguard/internal/mockllm"
)

// testCA issues certificates for 127.0.0.1 that a client trusting pool
// accepts.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pool *x509.CertPool
}

func newTestCA(t *testing.T) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "llmguard test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &testCA{cert: cert, key: key, pool: pool}
}

// issue writes a leaf for 127.0.0.1 named cn, valid until notAfter, to
// certFile and keyFile (by rename, as a renewal tool would).
func (ca *testCA) issue(t *testing.T, cn string, serial int64, notAfter time.Time, certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: notAfter,
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		KeyUsage: x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	writeAtomically(t, keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}))
	writeAtomically(t, certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}

func writeAtomically(t *testing.T, path string, b []byte) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// servedCert is the leaf a TLS handshake with addr presents.
func servedCert(t *testing.T, addr string, pool *x509.CertPool) (*x509.Certificate, error) {
	t.Helper()
	c, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"})
	if err != nil {
		return nil, err
	}
	defer c.Close()
	return c.ConnectionState().PeerCertificates[0], nil
}

// Both listeners serve TLS with their own files; the proxy forwards over
// it; a renewed certificate is served to new connections without a
// restart; a broken renewal is counted and the running certificate stays.
func TestTLSListenersAndCertificateReload(t *testing.T) {
	dir := t.TempDir()
	ca := newTestCA(t)
	proxyCert, proxyKey := filepath.Join(dir, "proxy.crt"), filepath.Join(dir, "proxy.key")
	adminCert, adminKey := filepath.Join(dir, "admin", "tls.crt"), filepath.Join(dir, "admin", "tls.key")
	os.Mkdir(filepath.Join(dir, "admin"), 0o700)
	firstExpiry := time.Now().Add(48 * time.Hour).Truncate(time.Second)
	ca.issue(t, "proxy-1", 10, firstExpiry, proxyCert, proxyKey)
	ca.issue(t, "admin-1", 20, firstExpiry, adminCert, adminKey)

	mock, err := mockllm.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mock.Close() })
	// Relative paths are read from the config file's directory.
	cfgPath := filepath.Join(dir, "llmguard.yaml")
	os.WriteFile(cfgPath, []byte(baseConfig(t, mock.URL, `
tls: {cert_file: proxy.crt, key_file: proxy.key}
admin_tls: {cert_file: admin/tls.crt, key_file: admin/tls.key}
`)), 0o600)
	h := startFile(t, mock, cfgPath, slog.New(slog.NewTextHandler(io.Discard, nil)))
	proxyAddr := strings.TrimPrefix(h.url, "http://")
	adminAddr := strings.TrimPrefix(h.admin, "http://")

	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.pool}}}
	t.Cleanup(client.CloseIdleConnections)
	req, _ := http.NewRequest(http.MethodPost, "https://"+proxyAddr+"/v1/chat/completions",
		strings.NewReader(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hello over TLS"}]}`))
	req.Header.Set("Authorization", "Bearer "+testKey)
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), "chat.completion") {
		t.Fatalf("proxy over TLS: %d %.300s", resp.StatusCode, body)
	}
	resp, err = client.Get("https://" + adminAddr + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("admin /readyz over TLS: %d", resp.StatusCode)
	}
	for addr, want := range map[string]string{proxyAddr: "proxy-1", adminAddr: "admin-1"} {
		c, err := servedCert(t, addr, ca.pool)
		if err != nil || c.Subject.CommonName != want {
			t.Fatalf("%s serves %v (%v), want %s", addr, c.Subject, err, want)
		}
	}
	// Plain HTTP to a TLS listener is not served as a request.
	if resp, err := http.Get("http://" + adminAddr + "/readyz"); err == nil {
		resp.Body.Close()
		if resp.StatusCode == 200 {
			t.Fatal("plain HTTP answered 200 on the TLS admin listener")
		}
	}
	metrics := func() string {
		resp, err := client.Get("https://" + adminAddr + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	if m := metrics(); !strings.Contains(m, `llmguard_tls_certificate_expiry_timestamp_seconds{listener="proxy"} `+strconv.FormatFloat(float64(firstExpiry.Unix()), 'g', -1, 64)) {
		t.Errorf("expiry gauge missing or wrong (want %d):\n%s", firstExpiry.Unix(), grepLines(m, "llmguard_tls"))
	}

	// Renewal: new files, same paths. New connections get the new leaf.
	ca.issue(t, "proxy-2", 11, time.Now().Add(72*time.Hour), proxyCert, proxyKey)
	waitForCert(t, proxyAddr, ca.pool, "proxy-2")
	if c, _ := servedCert(t, adminAddr, ca.pool); c == nil || c.Subject.CommonName != "admin-1" {
		t.Errorf("admin listener changed certificate with the proxy's files: %v", c)
	}

	// A broken renewal (a key that does not match): counted, and the
	// running certificate stays in force.
	writeAtomically(t, proxyKey, mustKeyPEM(t))
	waitForMetric(t, metrics, `llmguard_tls_reloads_total{listener="proxy",result="failed"}`)
	if c, err := servedCert(t, proxyAddr, ca.pool); err != nil || c.Subject.CommonName != "proxy-2" {
		t.Fatalf("after a broken renewal the proxy serves %v (%v), want proxy-2 still", c, err)
	}
}

func mustKeyPEM(t *testing.T) []byte {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	kb, _ := x509.MarshalECPrivateKey(key)
	return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb})
}

func waitForCert(t *testing.T, addr string, pool *x509.CertPool, cn string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second) // a failure timeout only: the watch reacts in ~100 ms
	for {
		c, err := servedCert(t, addr, pool)
		if err == nil && c.Subject.CommonName == cn {
			return
		}
		if time.Now().After(deadline) {
			name := "nothing"
			if c != nil {
				name = c.Subject.CommonName
			}
			t.Fatalf("%s still serves %s (%v), want %s", addr, name, err, cn)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func waitForMetric(t *testing.T, metrics func() string, series string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if strings.Contains(metrics(), series+" 1") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never reached 1:\n%s", series, grepLines(metrics(), "llmguard_tls"))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A tls section missing a file, or naming files that hold no usable pair,
// is refused naming the field or the file, at parse and at start.
func TestTLSConfigRefused(t *testing.T) {
	mock, err := mockllm.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mock.Close() })
	_, err = config.Parse([]byte(baseConfig(t, mock.URL, "tls: {cert_file: a.crt}\n")))
	if err == nil || !strings.Contains(err.Error(), "tls.key_file") {
		t.Errorf("tls without key_file: %v", err)
	}
	_, err = config.Parse([]byte(baseConfig(t, mock.URL, "admin_tls: {cert_file: a.pem, key_file: a.pem}\n")))
	if err == nil || !strings.Contains(err.Error(), "admin_tls") {
		t.Errorf("admin_tls with one file for both: %v", err)
	}
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.crt")
	os.WriteFile(bad, []byte("not a certificate"), 0o600)
	cfg, err := config.Parse([]byte(baseConfig(t, mock.URL, fmt.Sprintf("tls: {cert_file: %q, key_file: %q}\n", bad, filepath.Join(dir, "missing.key")))))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil))); err == nil || !strings.Contains(err.Error(), "missing.key") {
		t.Errorf("start with a missing key file: %v", err)
	}
	findings, err := CheckConfig(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if f := Fatal(findings); len(f) == 0 || !strings.Contains(f[0].String(), "tls") {
		t.Errorf("validate: findings %v, want a fatal one naming tls", findings)
	}
}

// A refused reload is counted and shown on /readyz until a good one.
func TestFailedReloadOnReadyz(t *testing.T) {
	mock, err := mockllm.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mock.Close() })
	dir := t.TempDir()
	path := filepath.Join(dir, "llmguard.yaml")
	good := baseConfig(t, mock.URL, "")
	os.WriteFile(path, []byte(good), 0o600)
	h := startFile(t, mock, path, slog.New(slog.NewTextHandler(io.Discard, nil)))
	readyz := func() map[string]any {
		resp, err := http.Get(h.admin + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("/readyz: %d (a refused reload must leave the node ready)", resp.StatusCode)
		}
		var r map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
			t.Fatal(err)
		}
		c, _ := r["config"].(map[string]any)
		if c == nil {
			t.Fatalf("/readyz has no config object: %v", r)
		}
		return c
	}
	if c := readyz(); c["reload_failures"] != 0.0 || c["last_reload_successful"] != true {
		t.Fatalf("before any reload: %v", c)
	}
	os.WriteFile(path, []byte(good+"limits: [{name: x, scope: user, unit: requests, rate: -1, per: 1m}]\n"), 0o600)
	if err := h.app.Reload(path); err == nil {
		t.Fatal("a negative rate was accepted")
	}
	c := readyz()
	if c["reload_failures"] != 1.0 || c["last_reload_successful"] != false || !strings.Contains(fmt.Sprint(c["last_reload_error"]), "limits[0]") {
		t.Fatalf("after a refused reload: %v", c)
	}
	if m := h.metrics(); !strings.Contains(m, `llmguard_config_reloads_total{result="failed"} 1`) || !strings.Contains(m, "llmguard_config_last_reload_successful 0") {
		t.Errorf("metrics after a refused reload:\n%s", grepLines(m, "llmguard_config"))
	}
	os.WriteFile(path, []byte(good), 0o600)
	if err := h.app.Reload(path); err != nil {
		t.Fatal(err)
	}
	c = readyz()
	if c["reloads"] != 1.0 || c["reload_failures"] != 1.0 || c["last_reload_successful"] != true || c["last_reload_error"] != nil {
		t.Fatalf("after a good reload: %v", c)
	}
	if m := h.metrics(); !strings.Contains(m, `llmguard_config_reloads_total{result="ok"} 1`) || !strings.Contains(m, "llmguard_config_last_reload_successful 1") {
		t.Errorf("metrics after a good reload:\n%s", grepLines(m, "llmguard_config"))
	}
}

// `validate` refuses an access log file serve could not open: a missing
// directory, or a path that is a directory.
func TestValidateAccessLogOutput(t *testing.T) {
	mock, err := mockllm.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mock.Close() })
	dir := t.TempDir()
	for out, want := range map[string]string{
		filepath.Join(dir, "missing", "access.log"): "cannot be used",
		dir:                              "not a regular file",
		filepath.Join(dir, "access.log"): "",
	} {
		cfg, err := config.Parse([]byte(baseConfig(t, mock.URL, fmt.Sprintf("access_log: {enabled: true, output: %q}\n", out))))
		if err != nil {
			t.Fatal(err)
		}
		findings, err := CheckConfig(cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		fatal := Fatal(findings)
		switch {
		case want == "" && len(fatal) > 0:
			t.Errorf("%s: refused: %v", out, fatal)
		case want != "" && (len(fatal) != 1 || !strings.Contains(fatal[0].String(), "access_log.output") || !strings.Contains(fatal[0].String(), want)):
			t.Errorf("%s: findings %v, want one naming access_log.output saying %q", out, findings, want)
		}
	}
}

// An access_log section that names an output but not enabled: true logs
// nothing (the log is off by default): `validate` warns of it, not of the
// section left at its default (trial7).
func TestValidateAccessLogOutputWithoutEnabled(t *testing.T) {
	mock, err := mockllm.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mock.Close() })
	path := filepath.Join(t.TempDir(), "access.log")
	for tail, want := range map[string]bool{
		fmt.Sprintf("access_log: {output: %q}\n", path):                true,
		"access_log: {output: stdout}\n":                               true,
		fmt.Sprintf("access_log: {enabled: true, output: %q}\n", path): false,
		"access_log: {format: text}\n":                                 false,
		"":                                                             false,
	} {
		cfg, err := config.Parse([]byte(baseConfig(t, mock.URL, tail)))
		if err != nil {
			t.Fatal(err)
		}
		findings, err := CheckConfig(cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		warned := false
		for _, f := range findings {
			if f.Field == "access_log" && !f.Fatal && strings.Contains(f.Message, "add enabled: true") {
				warned = true
			}
		}
		if warned != want {
			t.Errorf("%q: findings %v, want a warning to enable the log: %v", tail, findings, want)
		}
	}
}
