package loadbench

import (
	"fmt"
	"testing"

	"github.com/llmguard/llmguard/weigher"
)

// BenchmarkWeighWarm weighs the load benchmark's warm bodies (one worker's
// growing conversation, trimmed as the load generator trims it) through a
// weigher with the count cache, after the unmeasured first body: the
// weigher's share of a warm request of the "Performance" table, per body
// size. The bodies are built outside the timer. For instruction counts,
// inside the weighing only:
//
//	go test -c -o /tmp/lb.test ./internal/loadbench
//	GODEBUG=asyncpreemptoff=1 GOMAXPROCS=1 valgrind --tool=callgrind \
//	  --collect-atstart=no --toggle-collect='*weigher.(*Weigher).Chat' \
//	  /tmp/lb.test -test.run XXX -test.bench 'WeighWarm/128k' -test.benchtime 200x -test.cpu 1
func BenchmarkWeighWarm(b *testing.B) {
	pool := newTextPool(1)
	for _, size := range []int{16 << 10, 128 << 10} {
		b.Run(fmt.Sprintf("%dk", size>>10), func(b *testing.B) {
			w, err := weigher.New(weigher.Options{DefaultMaxOutputTokens: 256})
			if err != nil {
				b.Fatal(err)
			}
			c := newConversation(pool, Shape{Size: size, Warm: true}, 7)
			w.Chat(c.next()) // the first body: all new text, as the warm-up sends it
			bytes := 0
			b.ReportAllocs()
			for b.Loop() {
				b.StopTimer()
				body := c.next()
				bytes += len(body)
				b.StartTimer()
				if e := w.Chat(body); !e.Parsed {
					b.Fatal(e.FaultDetail)
				}
			}
			b.ReportMetric(float64(bytes)/float64(b.N), "body-bytes/op")
		})
	}
}
