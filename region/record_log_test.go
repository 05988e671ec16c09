package region

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// A region without a share record yet (a first start, a Redis that lost
// its data) reads its floor quietly; only a record that is there and does
// not parse is warned of (the trial's first start of two regions logged
// "a share record does not parse" three and four times on healthy nodes).
func TestMissingRecordIsNotUnparsable(t *testing.T) {
	w := newWorld(t, worldOptions{Regions: map[string]float64{"eu": 0.6, "us": 0.4}, NodesPerRegion: 1,
		Burst: 1000, Rate: 100, Exchange: true, Every: time.Second, MaxStep: 0.1, MinShare: 0.1})
	n := w.nodes[0]
	var logs bytes.Buffer
	n.x.o.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	const warning = "a share record does not parse"

	if err := n.x.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(logs.String(), warning) {
		t.Errorf("no record yet: logged %q", logs.String())
	}
	if got, floor := n.share(), n.rule().Regional.Floors[n.rule().Regional.Self]; got != floor {
		t.Errorf("no record yet: share %d, want the floor %d", got, floor)
	}

	// A record that is there and does not parse is still warned of.
	key := shareKey(n.rule(), n.region)
	if err := w.peek[n.region].Set(context.Background(), key, "not a record", redis.KeepTTL).Err(); err != nil {
		t.Fatal(err)
	}
	if err := n.x.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), warning) {
		t.Errorf("a record that does not parse: logged %q, want %q", logs.String(), warning)
	}
}
