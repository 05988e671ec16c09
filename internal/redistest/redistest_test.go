package redistest

import (
	"context"
	"github.com/redis/go-redis/v9"
	"sync/atomic"
	"testing"
)

func TestStartKillRestart(t *testing.T) {
	ctx := context.Background()
	s := Start(t)
	if s.Port() == 6379 {
		t.Fatal("started on Redis's default port")
	}
	c := s.Client()
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	s.Kill()
	if err := c.Ping(ctx).Err(); err == nil {
		t.Fatal("PING answered after Kill")
	}
	s.Restart()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("PING after Restart: %v", err)
	}
	if n, err := c.Exists(ctx, "k").Result(); err != nil || n != 0 {
		t.Fatalf("EXISTS k after a restart = %d, %v; want 0: no persistence", n, err)
	}
}

func TestStartCluster(t *testing.T) {
	ctx := context.Background()
	cl := StartCluster(t, 3)
	c := cl.Client()
	// Keys in slots of every master.
	for _, k := range []string{"{a}x", "{b}x", "{c}x", "{d}x", "{e}x", "{f}x"} {
		if err := c.Set(ctx, k, "v", 0).Err(); err != nil {
			t.Fatalf("SET %s: %v", k, err)
		}
	}
	var masters atomic.Int32
	if err := c.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
		masters.Add(1)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if masters.Load() != 3 {
		t.Fatalf("%d masters, want 3", masters.Load())
	}
}
