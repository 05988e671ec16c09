package app

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/llmguard/llmguard/internal/redistest"
)

// A Redis Cluster whose nodes need a password (requirepass) is reached
// through cluster_addrs written as redis://:password@host:port: the limits
// read-out and a request take from it, and the key store keeps its keys in
// it. trial4: cluster_addrs took host:port only, so against such a cluster
// every take failed with NOAUTH and fail-open limits were served from the
// node's fallback share for as long as it ran.
func TestClusterWithPassword(t *testing.T) {
	c := redistest.StartCluster(t, 3)
	const password = "s3cret-pw"
	urls := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		if err := n.Client().ConfigSet(context.Background(), "requirepass", password).Err(); err != nil {
			t.Fatal(err)
		}
		urls[i] = fmt.Sprintf("%q", "redis://:"+password+"@"+n.Addr())
	}
	store := fmt.Sprintf("{backend: redis_cluster, cluster_addrs: [%s], timeout: 1s}", strings.Join(urls, ", "))
	t.Run("limits", func(t *testing.T) {
		testLimitsReadOut(t, "store: "+store+"\n")
	})
	t.Run("key store", func(t *testing.T) {
		n := startKeyNodes(t, 1, func(_ int, mockURL string) string { return keyStoreConfig(t, mockURL, store, "1h") }, nil)[0]
		k := n.create(`{"tenant":"acme","user":"kim"}`, "")
		if st, body := n.chat(k.Secret); st != 200 {
			t.Fatalf("a stored key on the cluster: %d %s", st, body)
		}
	})
}
