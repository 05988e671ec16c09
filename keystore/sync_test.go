package keystore

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/llmguard/llmguard/internal/redistest"
)

// blackhole forwards TCP connections to a Redis; Blackhole makes every
// connection open now silent both ways without closing it (a peer gone
// without a FIN or RST), while new connections work.
type blackhole struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	pairs  []*atomic.Bool
	conns  []net.Conn
	wg     sync.WaitGroup
}

func startBlackhole(t *testing.T, target string) *blackhole {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &blackhole{ln: ln, target: target}
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			dead := new(atomic.Bool)
			b.mu.Lock()
			b.pairs, b.conns = append(b.pairs, dead), append(b.conns, c, up)
			b.mu.Unlock()
			b.wg.Add(2)
			go b.pipe(up, c, dead)
			go b.pipe(c, up, dead)
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		b.mu.Lock()
		for _, c := range b.conns {
			c.Close()
		}
		b.mu.Unlock()
		b.wg.Wait()
	})
	return b
}

func (b *blackhole) pipe(dst, src net.Conn, dead *atomic.Bool) {
	defer b.wg.Done()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && !dead.Load() {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if err != io.EOF {
				return
			}
			dst.Close()
			return
		}
	}
}

// Blackhole silences every connection open now.
func (b *blackhole) Blackhole() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, d := range b.pairs {
		d.Store(true)
	}
}

// A subscription whose connection went silent (no FIN, no RST) is noticed
// by its unanswered ping: the syncer subscribes anew and reads the whole
// registry, finding the change whose notification was lost, long before
// its periodic resync (an hour).
func TestSyncerRecoversFromASilentConnection(t *testing.T) {
	srv := redistest.Start(t)
	hole := startBlackhole(t, srv.Addr())
	client := redis.NewClient(&redis.Options{Addr: hole.ln.Addr().String(), ReadTimeout: 300 * time.Millisecond,
		WriteTimeout: 300 * time.Millisecond, DialTimeout: time.Second, MaxRetries: -1})
	t.Cleanup(func() { client.Close() })
	reg := NewRegistry(RegistryOptions{Client: client})
	cache := NewCache()
	s := StartSyncer(SyncOptions{Client: client, Registry: reg, Cache: cache, Resync: time.Hour, PingEvery: 200 * time.Millisecond,
		Timeout: time.Second})
	t.Cleanup(func() { s.Close() })

	direct := NewRegistry(RegistryOptions{Client: srv.Client()})
	ctx := context.Background()
	secret, _, err := direct.Create(ctx, Spec{Tenant: "acme"}, ops, t0)
	if err != nil {
		t.Fatal(err)
	}
	waitKey(t, cache, secret)

	hole.Blackhole()
	later, _, err := direct.Create(ctx, Spec{Tenant: "acme"}, ops, t0)
	if err != nil {
		t.Fatal(err)
	}
	waitKey(t, cache, later)
}

// waitKey polls cache for secret's key, 20 s at most (a failure timeout).
func waitKey(t *testing.T, c *Cache, secret string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, ok := lookup(c, secret); ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the key never reached the cache")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Through a real redis-server: a key whose registry is lost (FLUSHALL, as
// a Redis restarting without persistence) is dropped at the next read, and
// a forged notification un-revoking a key lasts only until the next read.
func TestSyncerFollowsTheRegistryBackwards(t *testing.T) {
	srv := redistest.Start(t)
	client := srv.Client()
	reg := NewRegistry(RegistryOptions{Client: client})
	cache := NewCache()
	s := StartSyncer(SyncOptions{Client: client, Registry: reg, Cache: cache, Resync: time.Hour, Timeout: 5 * time.Second})
	t.Cleanup(func() { s.Close() })
	ctx := context.Background()
	var ids []string
	var secrets []string
	for range 5 {
		secret, rec, err := reg.Create(ctx, Spec{Tenant: "acme"}, ops, t0)
		if err != nil {
			t.Fatal(err)
		}
		ids, secrets = append(ids, rec.ID), append(secrets, secret)
	}
	waitKey(t, cache, secrets[4])
	revoked, _, err := reg.Revoke(ctx, ids[0], ops, t0)
	if err != nil {
		t.Fatal(err)
	}
	forged := revoked
	forged.RevokedAt, forged.RevokedBy, forged.Rev = time.Time{}, "", 1<<62
	b, _ := json.Marshal(forged)
	if err := client.Publish(ctx, Channel, b).Err(); err != nil {
		t.Fatal(err)
	}
	// Wait for the forged record itself (its rev): the key's record from
	// before the revocation is unrevoked too, and under load the revoke's
	// own notification may not have arrived yet.
	forgedHere := func() bool {
		for _, r := range cache.Records() {
			if r.ID == ids[0] && r.Rev == forged.Rev {
				return true
			}
		}
		return false
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		if k, ok := cache.LookupKey(sha256.Sum256([]byte(secrets[0]))); ok && !k.Revoked && forgedHere() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the forged notification never arrived (the test's premise)")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := s.Resync(ctx); err != nil {
		t.Fatal(err)
	}
	if k, _ := cache.LookupKey(sha256.Sum256([]byte(secrets[0]))); !k.Revoked {
		t.Error("a forged notification un-revoked a key past a whole read of the registry")
	}

	if err := client.FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if err := s.Resync(ctx); err != nil {
		t.Fatal(err)
	}
	for i, sec := range secrets {
		if _, ok := lookup(cache, sec); ok {
			t.Errorf("key %s still served after its registry was emptied and read again", ids[i])
		}
	}
}
