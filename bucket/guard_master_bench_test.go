package bucket_test

import (
	"testing"
	"time"

	"github.com/llmguard/llmguard/bucket"
)

// BenchmarkGuardedTakePerMaster is BenchmarkGuardedTake with one breaker per
// master (GuardOptions.MasterOf, here a slot range per master of three, as
// go-redis's slot map answers it).
func BenchmarkGuardedTakePerMaster(b *testing.B) {
	masters := [...]string{"10.0.0.1:6379", "10.0.0.2:6379", "10.0.0.3:6379"}
	benchGuardedTake(b, bucket.GuardOptions{Timeout: time.Hour, MasterOf: func(key string) string {
		return masters[int(bucket.SlotOf(key))*3/16384]
	}})
}
