package mockllm

import (
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/tidwall/gjson"
	"github.com/valyala/fasthttp"

	"github.com/llmguard/llmguard/internal/jsonscan"
)

// completions answers the legacy /v1/completions
// (https://platform.openai.com/docs/api-reference/completions): one choice
// whatever n, best_of or the number of prompts.
func (s *Server) completions(ctx *fasthttp.RequestCtx) {
	body := ctx.Request.Body()
	if !jsonscan.Valid(body, maxJSONDepth) {
		badJSON(ctx)
		return
	}
	st := steerOf(&ctx.Request.Header)
	est := s.w.Completions(body)
	limit := int64(16) // the API's default max_tokens
	if m := gjson.GetBytes(body, "max_tokens"); m.Type == gjson.Number {
		limit = m.Int()
	}
	n := st.outputTokens(limit)
	parts := replyWords(n)
	finish := "stop"
	if n >= limit {
		finish = "length"
	}
	usage := fmt.Sprintf(`{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d}`, est.InputTokens, n, est.InputTokens+n)
	id := newID("cmpl-")
	created := time.Now().Unix()
	head := fmt.Sprintf(`{"id":%s,"object":"text_completion","created":%d,"model":%s,"system_fingerprint":"fp_mock"`, js(id), created, js(est.Model))

	if !est.Stream {
		u := `,"usage":` + usage
		if st.noUsage {
			u = ""
		}
		jsonBody(ctx, st, head+`,"choices":[{"text":`+js(strings.Join(parts, ""))+`,"index":0,"logprobs":null,"finish_reason":`+js(finish)+`}]`+u+`}`)
		return
	}

	includeUsage := est.IncludeUsage && !st.noUsage
	s.stream(ctx, st, func(o *sse) end {
		chunk := func(text, finish string) bool {
			fin := "null"
			if finish != "" {
				fin = js(finish)
			}
			u := ""
			if includeUsage {
				u = `,"usage":null`
			}
			return o.event("", head+`,"choices":[{"text":`+js(text)+`,"index":0,"logprobs":null,"finish_reason":`+fin+`}]`+u+`}`)
		}
		stop, how, early := st.stopAt(len(parts))
		for i, p := range parts {
			if early && i == stop {
				break
			}
			o.pause()
			if !chunk(p, "") {
				return endAborted
			}
		}
		if early {
			return openAIStop(o, how)
		}
		chunk("", finish)
		if includeUsage {
			o.event("", head+`,"choices":[],"usage":`+usage+`}`)
		}
		if !o.event("", "[DONE]") {
			return endAborted
		}
		return endCompleted
	})
}

// embeddingDims is the length of the mock's embeddings.
const embeddingDims = 8

// embeddings answers /v1/embeddings
// (https://platform.openai.com/docs/api-reference/embeddings): one
// embedding per input item — a string or a token array is one item, an
// array of strings or of token arrays one per element — as floats, or as
// base64 little-endian float32 when encoding_format is "base64" (what the
// OpenAI Python SDK asks for by default).
func (s *Server) embeddings(ctx *fasthttp.RequestCtx) {
	body := ctx.Request.Body()
	if !jsonscan.Valid(body, maxJSONDepth) {
		badJSON(ctx)
		return
	}
	st := steerOf(&ctx.Request.Header)
	est := s.w.Embeddings(body)
	items := 1
	if in := gjson.GetBytes(body, "input"); in.IsArray() {
		arr := in.Array()
		items = len(arr)
		if len(arr) > 0 && arr[0].Type == gjson.Number {
			items = 1 // one token array
		}
	}
	b64 := gjson.GetBytes(body, "encoding_format").String() == "base64"
	var b strings.Builder
	b.WriteString(`{"object":"list","data":[`)
	for i := range items {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`{"object":"embedding","index":` + strconv.Itoa(i) + `,"embedding":`)
		v := embedding(i)
		if b64 {
			raw := make([]byte, 0, 4*len(v))
			for _, f := range v {
				raw = binary.LittleEndian.AppendUint32(raw, math.Float32bits(f))
			}
			b.WriteString(js(base64.StdEncoding.EncodeToString(raw)))
		} else {
			b.WriteByte('[')
			for j, f := range v {
				if j > 0 {
					b.WriteByte(',')
				}
				b.WriteString(strconv.FormatFloat(float64(f), 'g', -1, 32))
			}
			b.WriteByte(']')
		}
		b.WriteByte('}')
	}
	b.WriteString(`],"model":` + js(est.Model))
	if !st.noUsage {
		fmt.Fprintf(&b, `,"usage":{"prompt_tokens":%d,"total_tokens":%d}`, est.InputTokens, est.InputTokens)
	}
	b.WriteByte('}')
	jsonBody(ctx, st, b.String())
}

// embedding is the deterministic vector of the i-th input item.
func embedding(i int) [embeddingDims]float32 {
	var v [embeddingDims]float32
	for d := range v {
		v[d] = float32(math.Round(math.Sin(float64(i*embeddingDims+d+1))*1e6) / 1e6)
	}
	return v
}
