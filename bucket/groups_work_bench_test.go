package bucket_test

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/llmguard/llmguard/bucket"
	"github.com/llmguard/llmguard/internal/redisstats"
	"github.com/llmguard/llmguard/internal/redistest"
)

// BenchmarkClusterGroupsWork measures, on a Redis Cluster of 3 masters
// started for the run, a take over two slot groups on two masters (a
// tenant's two buckets, "{<tenant>}", then a global one) with a request
// id, as the proxy sends it: admitted; denied by the first group (the
// tenant's bucket empty); denied by the second (the global one empty),
// the tenant's two limits token buckets, a sliding and a fixed window, or
// an in-flight limit (cost 1) and a token bucket.
// Besides ns/op (sequential: the latency of one request at c1) it reports
// what Redis did per take, summed over the masters (INFO commandstats and
// stats): commands run (those the scripts ran included), scripts, and
// reads of client connections (about round trips). The rtt1ms runs go
// through a client whose connections hold each reply until 1 ms after the
// request that it answers was written (slowConn): a network's round trip,
// which loopback on a loaded 2-core machine cannot show. Issue #14's A/B of
// sending the groups one after the other against at once: run it on each
// build, alternating.
func BenchmarkClusterGroupsWork(b *testing.B) {
	cl := redistest.SharedCluster(b, 3)
	b.Run("loopback", func(b *testing.B) { benchGroupsWork(b, cl, cl.Client()) })
	slow := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs(), Dialer: func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &slowConn{Conn: c, rtt: time.Millisecond}, nil
	}})
	b.Cleanup(func() { slow.Close() })
	b.Run("rtt1ms", func(b *testing.B) { benchGroupsWork(b, cl, slow) })
}

// slowConn delays each read that follows a write until rtt after the
// write: a round trip of at least rtt, as over a network.
type slowConn struct {
	net.Conn
	rtt     time.Duration
	written time.Time // the last write not yet answered
}

func (c *slowConn) Write(p []byte) (int, error) {
	if c.written.IsZero() {
		c.written = time.Now()
	}
	return c.Conn.Write(p)
}

func (c *slowConn) Read(p []byte) (int, error) {
	if !c.written.IsZero() {
		time.Sleep(time.Until(c.written.Add(c.rtt)))
		c.written = time.Time{}
	}
	return c.Conn.Read(p)
}

func benchGroupsWork(b *testing.B, cl *redistest.Cluster, cc *redis.ClusterClient) {
	ctx := context.Background()
	r := newRedis(b, bucket.RedisOptions{Client: cc})
	// A tenant off the global bucket's master: the two groups on two masters.
	const global = "llmguard:{global}:tpm"
	tenant := ""
	for n := range 200 {
		if t := fmt.Sprintf("bt%d", n); cl.MasterOf("{"+t+"}") != cl.MasterOf(global) {
			tenant = t
			break
		}
	}
	big := bucket.Limit{Capacity: 1 << 50, Rate: 1 << 40, Per: time.Second}
	empty := bucket.Limit{Capacity: 100, Rate: 1, Per: 24 * time.Hour}
	for _, c := range []struct {
		name    string
		emptyAt int // the item whose bucket is empty, -1 none
		// tenant: the tenant's two limits, when not two token buckets
		// (the refunded group's statuses come from the take's reply
		// another way).
		tenant [2]bucket.Limit
	}{
		{name: "admitted", emptyAt: -1},
		{name: "denied-first", emptyAt: 0},
		{name: "denied-second", emptyAt: 2},
		{name: "denied-second-windows", emptyAt: 2, tenant: [2]bucket.Limit{
			bucket.Window(bucket.SlidingWindow, 1<<50, time.Minute), bucket.Window(bucket.FixedWindow, 1<<50, time.Minute)}},
		{name: "denied-second-inflight", emptyAt: 2, tenant: [2]bucket.Limit{bucket.Slots(bucket.MaxSlots, 10*time.Second), big}},
	} {
		b.Run(c.name, func(b *testing.B) {
			run := fmt.Sprintf("%s-%d-%d", c.name, b.N, time.Now().UnixNano())
			items := []bucket.Item{
				{Key: "llmguard:{" + tenant + "}:rpm:" + run, Limit: big, Cost: 1},
				{Key: "llmguard:{" + tenant + "}:tpm:" + run, Limit: big, Cost: 1500},
				{Key: global + ":" + run, Limit: big, Cost: 1500},
			}
			for j, l := range c.tenant {
				if l.Capacity > 0 {
					items[j].Limit = l
				}
			}
			if c.emptyAt >= 0 {
				it := &items[c.emptyAt]
				it.Limit = empty
				if d, err := r.Take(ctx, "", []bucket.Item{{Key: it.Key, Limit: empty, Cost: 100}}); err != nil || !d.Allowed {
					b.Fatalf("emptying %s: %+v, %v", it.Key, d, err)
				}
				it.Cost = 10
			}
			if err := redisstats.ResetCluster(ctx, cc); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for b.Loop() {
				d, err := r.Take(ctx, bucket.NewRequestID(time.Now()), items)
				if err != nil {
					b.Fatal(err)
				}
				if d.Allowed != (c.emptyAt < 0) || !d.Allowed && d.DeniedBy != c.emptyAt {
					b.Fatalf("decision %+v, want the bucket empty at %d to deny", d, c.emptyAt)
				}
			}
			b.StopTimer()
			got, err := redisstats.ReadCluster(ctx, cc)
			if err != nil {
				b.Fatal(err)
			}
			per := got.Per(int64(b.N))
			b.ReportMetric(per.Calls, "cmds/op")
			b.ReportMetric(per.Scripts, "scripts/op")
			b.ReportMetric(per.Reads, "reads/op")
		})
	}
}
