package weigher

import (
	"fmt"
	"strings"
	"testing"
)

// agentBody is a chat request of about 1 KiB as agents send them: a system
// prompt, three function tools and a few turns; salt makes every message
// and tool description text never sent before (cold), or, fixed, the same
// body again (warm: every element remembered).
func agentBody(salt int) []byte { return agentBodyOf(salt, 4, 1) }

// agentBodyOf is agentBody with turns turns, each turn's sentence said
// reps times: agentBodyOf(salt, 54, 3) is about 16 KiB.
func agentBodyOf(salt, turns, reps int) []byte {
	var tools []string
	for i := range 3 {
		tools = append(tools, fmt.Sprintf(`{"type":"function","function":{"name":"tool_%d","description":"%d looks things up in the index and returns the matching records","parameters":{"type":"object","properties":{"query":{"type":"string","description":"what to look for"}},"required":["query"]}}}`, i, salt))
	}
	msgs := []string{fmt.Sprintf(`{"role":"system","content":"%d You are a careful assistant. Use the tools when a question needs data you do not have."}`, salt)}
	for i := range turns {
		role := [...]string{"user", "assistant"}[i%2]
		text := strings.Repeat(" the token bucket refills at a steady rate and admits a burst up to its capacity.", reps)
		msgs = append(msgs, fmt.Sprintf(`{"role":%q,"content":"%d turn %d:%s"}`, role, salt, i, text))
	}
	return []byte(`{"model":"gpt-4o-mini","max_tokens":256,"messages":[` + strings.Join(msgs, ",") + `],"tools":[` + strings.Join(tools, ",") + `]}`)
}

// BenchmarkAgent1KB weighs a 1 KiB agent request through the count cache:
// cold (all text new) and warm (the same request again).
//
//	go test -run XXX -bench Agent1KB -benchmem ./weigher
func BenchmarkAgent1KB(b *testing.B) { benchmarkAgent(b, agentBody) }

// BenchmarkAgent16KB is BenchmarkAgent1KB with a 16 KiB request of 54
// turns.
//
//	go test -run XXX -bench Agent16KB -benchmem ./weigher
func BenchmarkAgent16KB(b *testing.B) {
	benchmarkAgent(b, func(salt int) []byte { return agentBodyOf(salt, 54, 3) })
}

func benchmarkAgent(b *testing.B, agentBody func(salt int) []byte) {
	w := cachedWeigher(b, DefaultCacheBytes)
	b.Run("cold", func(b *testing.B) {
		bodies := make([][]byte, 4096)
		for i := range bodies {
			bodies[i] = agentBody(i + 1<<20)
		}
		b.SetBytes(int64(len(bodies[0])))
		b.ReportAllocs()
		b.ResetTimer()
		for i := range b.N {
			if i%len(bodies) == 0 && i > 0 {
				b.StopTimer()
				for j := range bodies {
					bodies[j] = agentBody(i + j + 1<<20)
				}
				b.StartTimer()
			}
			if e := w.Chat(bodies[i%len(bodies)]); !e.Parsed {
				b.Fatal(e.FaultDetail)
			}
		}
	})
	b.Run("warm", func(b *testing.B) {
		body := agentBody(1)
		w.Chat(body)
		b.SetBytes(int64(len(body)))
		b.ReportAllocs()
		b.ResetTimer()
		for range b.N {
			if e := w.Chat(body); !e.Parsed {
				b.Fatal(e.FaultDetail)
			}
		}
	})
}
