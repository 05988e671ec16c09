package app

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/llmguard/llmguard/config"
	"github.com/llmguard/llmguard/internal/mockllm"
)

// keysAdminToken is the admin bearer token of every key store test node.
const keysAdminToken = "admin-secret-for-tests"

// keyNode is one llmguard node of a key store test: its own listeners, on
// a shared Redis.
type keyNode struct {
	*harness
	name string
}

// keyStoreTail is the part of a key store node's config after listen and
// admin_listen: three flavors of upstream on the mock, one file key, a
// generous request limit (so every request goes through the store), the
// store (storeYAML) and the key store with resync period resync.
func keyStoreConfig(t *testing.T, mockURL, storeYAML, resync string) string {
	t.Helper()
	t.Setenv("LLMGUARD_TEST_ADMIN_TOKEN", keysAdminToken)
	return fmt.Sprintf(`
listen: 127.0.0.1:0
admin_listen: 127.0.0.1:0
admin_token_env: LLMGUARD_TEST_ADMIN_TOKEN
upstreams:
  - {name: openai, flavor: openai, base_url: "%[1]s", no_key: true}
  - {name: claude, flavor: anthropic, base_url: "%[1]s", no_key: true}
  - {name: azure, flavor: azure, base_url: "%[1]s", no_key: true}
keys:
  - {key: sk-file-alice, user: alice, tenant: acme, plan: pro}
limits:
  - {name: tenant-rpm, scope: tenant, unit: requests, rate: 1000000, per: 1m}
store: %[2]s
key_store: {enabled: true, resync: %[3]s}
`, mockURL, storeYAML, resync)
}

// startKeyNodes starts n nodes on one config, sharing the mock and the
// clock now (nil: the real one).
func startKeyNodes(t *testing.T, n int, yaml func(i int, mockURL string) string, now func() time.Time) []*keyNode {
	t.Helper()
	mock, err := mockllm.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mock.Close() })
	var out []*keyNode
	for i := range n {
		cfg, err := config.Parse([]byte(yaml(i, mock.URL)))
		if err != nil {
			t.Fatalf("config: %v", err)
		}
		h := startClock(t, mock, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), now)
		out = append(out, &keyNode{harness: h, name: string(rune('A' + i))})
	}
	return out
}

// admin sends an admin API request with the token (and the actor header,
// when actor is not empty) and returns the status and body.
func (n *keyNode) adminCall(method, path, body, actor string) (int, string) {
	n.t.Helper()
	req, err := http.NewRequest(method, n.admin+path, strings.NewReader(body))
	if err != nil {
		n.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+keysAdminToken)
	if actor != "" {
		req.Header.Set(ActorHeader, actor)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		n.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// create makes a key through node n's admin API.
func (n *keyNode) create(body, actor string) NewKey {
	n.t.Helper()
	st, b := n.adminCall(http.MethodPost, "/admin/keys", body, actor)
	if st != http.StatusCreated {
		n.t.Fatalf("node %s: create %s: %d %s", n.name, body, st, b)
	}
	var k NewKey
	if err := json.Unmarshal([]byte(b), &k); err != nil {
		n.t.Fatalf("create answered %s: %v", b, err)
	}
	return k
}

// chat sends a chat request with key to the OpenAI flavor and returns the
// status and body.
func (n *keyNode) chat(key string) (int, string) {
	n.t.Helper()
	resp, body := n.post(key, hiBody)
	return resp.StatusCode, body
}

// waitStatus polls node n with key until it answers want, for at most
// 20 s (a failure timeout, not a measure), and returns how long it took.
func (n *keyNode) waitStatus(key string, want int) time.Duration {
	n.t.Helper()
	t0 := time.Now()
	deadline := t0.Add(20 * time.Second)
	for {
		st, body := n.chat(key)
		if st == want {
			return time.Since(t0)
		}
		if time.Now().After(deadline) {
			n.t.Fatalf("node %s: key still answered %d after 20 s, want %d: %s", n.name, st, want, body)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// metric reads one sample of node n's /metrics ("name{labels}"), or -1.
func (n *keyNode) metric(sample string) float64 {
	n.t.Helper()
	for _, line := range strings.Split(n.metrics(), "\n") {
		if rest, ok := strings.CutPrefix(line, sample+" "); ok {
			var v float64
			fmt.Sscan(rest, &v)
			return v
		}
	}
	return -1
}

// waitMetric polls node n's sample until ok accepts it, for at most 20 s.
func (n *keyNode) waitMetric(sample string, ok func(float64) bool) float64 {
	n.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		v := n.metric(sample)
		if ok(v) {
			return v
		}
		if time.Now().After(deadline) {
			n.t.Fatalf("node %s: %s = %v after 20 s", n.name, sample, v)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// settled waits until node n's subscription is confirmed and the whole
// read it asked for is done: from then on only notifications (or the
// periodic resync) change its keys.
func (n *keyNode) settled() float64 {
	n.t.Helper()
	n.waitMetric("llmguard_key_store_subscribed", func(v float64) bool { return v == 1 })
	// The start-up read and the subscription's.
	return n.waitMetric(`llmguard_key_store_resyncs_total{result="ok"}`, func(v float64) bool { return v >= 2 })
}

// cutProxy forwards TCP connections to a Redis, and can cut them: the
// network between one node and the store failing while the store and the
// other nodes go on.
type cutProxy struct {
	t      *testing.T
	ln     net.Listener
	target string
	mu     sync.Mutex
	cut    bool
	conns  map[net.Conn]bool
	wg     sync.WaitGroup
}

func startCutProxy(t *testing.T, target string) *cutProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{t: t, ln: ln, target: target, conns: map[net.Conn]bool{}}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(func() {
		ln.Close()
		p.Cut()
		p.wg.Wait()
	})
	return p
}

func (p *cutProxy) Addr() string { return p.ln.Addr().String() }

func (p *cutProxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.cut {
			p.mu.Unlock()
			c.Close()
			continue
		}
		up, err := net.DialTimeout("tcp", p.target, time.Second)
		if err != nil {
			p.mu.Unlock()
			c.Close()
			continue
		}
		p.conns[c], p.conns[up] = true, true
		p.mu.Unlock()
		p.wg.Add(2)
		go p.pipe(c, up)
		go p.pipe(up, c)
	}
}

func (p *cutProxy) pipe(dst, src net.Conn) {
	defer p.wg.Done()
	io.Copy(dst, src)
	dst.Close()
	src.Close()
}

// Cut closes every forwarded connection and refuses new ones.
func (p *cutProxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	for c := range p.conns {
		c.Close()
	}
	clear(p.conns)
}

// Restore accepts connections again.
func (p *cutProxy) Restore() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = false
}

// sendAs posts body to path with only the credential header given
// (header: value) and the Anthropic version, and returns the status and
// body.
func (n *keyNode) sendAs(path, body, header, key string) (int, string) {
	n.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, n.url+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("anthropic-version", "2023-06-01")
	req.Header.Set(header, key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		n.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
