package proxy

import (
	"bufio"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/llmguard/llmguard/weigher"
)

// TestCheckEncodingAfterTheWalk: checkEncoding told by readFields' walk
// that the request has no Content-Encoding field (skipping fasthttp's
// PeekAll) returns what it returns looking the field up, codings and
// refusal, for requests with none, one or two such fields in any case,
// empty, unknown or stacked codings, beside a charset, with names
// normalised by fasthttp (as the server keeps them) or as sent.
func TestCheckEncodingAfterTheWalk(t *testing.T) {
	fieldSets := [][][2]string{
		nil,
		{{"Content-Type", "application/json"}},
		{{"Content-Encoding", "gzip"}},
		{{"content-encoding", "br"}},
		{{"CONTENT-ENCODING", "zstd"}},
		{{"Content-Encoding", ""}},
		{{"Content-Encoding", "identity"}},
		{{"Content-Encoding", "gzip, deflate"}},
		{{"Content-Encoding", "gzip"}, {"content-encoding", "br"}},
		{{"Content-Encoding", "compress"}},
		{{"Content-Encodings", "gzip"}},
		{{"Content-Type", "application/json; charset=latin1"}, {"Content-Encoding", "gzip"}},
		{{"x-portkey-config", "x"}, {"Content-Encoding", "gzip"}},
		{{"anthropic-beta", "context-1m-2025-08-07"}, {"Content-Encoding", "gzip"}},
	}
	seenCoded := 0
	for _, normalize := range []bool{true, false} {
		for i, fields := range fieldSets {
			var h fasthttp.RequestHeader
			if !normalize {
				h.DisableNormalizing()
			}
			h.SetMethod(fasthttp.MethodPost)
			for _, kv := range fields {
				h.Add(kv[0], kv[1])
			}
			name := fmt.Sprintf("set %d, normalising %v", i, normalize)
			f := readFields(&h)
			if f.routes {
				continue // refused before checkEncoding
			}
			if f.coded {
				seenCoded++
			}
			wantCodings, wantRefusal := checkEncoding(&h, weigher.KindChat, false)
			gotCodings, gotRefusal := checkEncoding(&h, weigher.KindChat, !f.coded)
			if !reflect.DeepEqual(gotCodings, wantCodings) || !reflect.DeepEqual(gotRefusal, wantRefusal) {
				t.Errorf("%s: after the walk %v, %+v; looked up %v, %+v", name, gotCodings, gotRefusal, wantCodings, wantRefusal)
			}
			if f.coded != hasCodingField(fields) {
				t.Errorf("%s: readFields coded %v", name, f.coded)
			}
		}
	}
	if seenCoded == 0 {
		t.Error("no field set had a Content-Encoding field")
	}
}

// hasCodingField reports whether fields name Content-Encoding in any case.
func hasCodingField(fields [][2]string) bool {
	for _, kv := range fields {
		if strings.EqualFold(kv[0], "Content-Encoding") {
			return true
		}
	}
	return false
}

// FuzzCheckEncodingAfterTheWalk: for any request head fasthttp reads,
// with its names normalised or as sent, checkEncoding after readFields'
// walk answers as it does looking the Content-Encoding field up.
//
//	go test -run XXX -fuzz '^FuzzCheckEncodingAfterTheWalk$' -fuzztime 60s ./proxy
func FuzzCheckEncodingAfterTheWalk(f *testing.F) {
	f.Add("Content-Encoding: gzip\r\n", false)
	f.Add("content-encoding: br\r\ncontent-encoding: gzip\r\n", true)
	f.Add("CONTENT-ENCODING:\r\nX-Portkey-Config: a\r\n", false)
	f.Add("Content-Type: application/json; charset=utf-16\r\nContent-Encoding: identity\r\n", true)
	f.Fuzz(func(t *testing.T, fields string, raw bool) {
		var h fasthttp.RequestHeader
		if raw {
			h.DisableNormalizing()
		}
		if err := h.Read(bufio.NewReader(strings.NewReader("POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n" + fields + "\r\n"))); err != nil {
			return
		}
		f := readFields(&h)
		if f.routes {
			return
		}
		wantCodings, wantRefusal := checkEncoding(&h, weigher.KindChat, false)
		gotCodings, gotRefusal := checkEncoding(&h, weigher.KindChat, !f.coded)
		if !reflect.DeepEqual(gotCodings, wantCodings) || !reflect.DeepEqual(gotRefusal, wantRefusal) {
			t.Fatalf("%q: after the walk %v, %+v; looked up %v, %+v", fields, gotCodings, gotRefusal, wantCodings, wantRefusal)
		}
	})
}
