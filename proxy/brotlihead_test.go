package proxy

import (
	"bytes"
	"io"
	"testing"
)

// brotliMetadataFlood is a Brotli stream (RFC 7932) of a 16-bit window
// whose meta-blocks are n metadata blocks of 64 KiB each (§9.2: MNIBBLES
// 0, skipped by a decoder), which decode to no output at all.
func brotliMetadataFlood(n int) []byte {
	var out []byte
	var acc uint64
	var bits uint
	put := func(v uint64, k uint) {
		acc |= v << bits
		bits += k
		for bits >= 8 {
			out = append(out, byte(acc))
			acc >>= 8
			bits -= 8
		}
	}
	align := func() {
		if bits > 0 {
			put(0, 8-bits)
		}
	}
	put(0, 1) // WBITS: 16
	for range n {
		put(0, 1)       // ISLAST
		put(3, 2)       // MNIBBLES: 0, a metadata block
		put(0, 1)       // reserved
		put(2, 2)       // MSKIPBYTES: 2
		put(0xffff, 16) // MSKIPLEN - 1: 65,535
		align()
		out = append(out, make([]byte, 1<<16)...)
	}
	return out
}

// TestBrotliFirstOutputBounded: a Brotli stream that decodes to nothing
// for a long while (metadata blocks, which RFC 7932 lets a stream hold
// any number of) is not read on without bound while decoder waits for
// its first output byte: openStream's headRecorder keeps every byte the
// decoder reads then, so an upstream sending 8 MiB of metadata (or
// endlessly, until its timeout) made the proxy hold all of it.
func TestBrotliFirstOutputBounded(t *testing.T) {
	flood := brotliMetadataFlood(128) // 8 MiB
	p := &Proxy{}
	p.answers.max = 64 << 20
	mem := decoderMemory{p: p}
	head := &headRecorder{r: bytes.NewReader(flood)}
	d, err := decoder("br", head, &mem)
	if err == nil {
		io.Copy(io.Discard, d)
	}
	mem.release()
	if len(head.buf) > brotliFirstInput+4096 {
		t.Errorf("the decoder read %d bytes of a stream without output before giving up, want at most about %d", len(head.buf), brotliFirstInput)
	}
	if err == nil {
		t.Error("a stream without output within its first bytes was decoded, want it relayed as sent")
	}
}
