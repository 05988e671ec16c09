package weigher

import (
	"fmt"
	"math"
	"strconv"
	"testing"
)

// TestHostedToolFeesReserved: a Responses request's file_search tool
// reserves its max_tool_calls (20 without), its image_generation tool the
// image tokens of its size and quality (the dearest, 6,240, for "auto" or
// none), plus 100 per partial image when it streams, times those calls;
// a Messages request naming code execution reserves 60 container-minutes.
// Other tools, and other kinds, reserve none.
func TestHostedToolFeesReserved(t *testing.T) {
	w := testWeigher(t)
	for _, tc := range []struct {
		name, extra, tools string
		files, image       int32
	}{
		{"file search, no max_tool_calls", ``, `[{"type":"file_search","vector_store_ids":["vs"]}]`, 20, 0},
		{"file search, max_tool_calls 3", `"max_tool_calls":3,`, `[{"type":"file_search"}]`, 3, 0},
		{"file search spelled with an escape", `"max_tool_calls":2,`, `[{"type":"file\u005fsearch"}]`, 2, 0},
		{"function named file_search", ``, `[{"type":"function","name":"file_search","parameters":{}}]`, 0, 0},
		{"image, low square, one call", `"max_tool_calls":1,`, `[{"type":"image_generation","quality":"low","size":"1024x1024"}]`, 0, 272},
		{"image, high portrait", `"max_tool_calls":1,`, `[{"type":"image_generation","quality":"high","size":"1024x1536"}]`, 0, 6240},
		{"image, auto", `"max_tool_calls":1,`, `[{"type":"image_generation","quality":"auto","size":"auto"}]`, 0, 6240},
		{"image, no fields, 20 calls", ``, `[{"type":"image_generation"}]`, 0, 20 * 6240},
		{"image, medium landscape, 2 calls", `"max_tool_calls":2,`, `[{"type":"image_generation","quality":"medium","size":"1536x1024"}]`, 0, 2 * 1568},
		{"image, partial images without a stream", `"max_tool_calls":1,`, `[{"type":"image_generation","quality":"low","size":"1024x1024","partial_images":3}]`, 0, 272},
		{"image, partial images streamed", `"stream":true,"max_tool_calls":1,`, `[{"type":"image_generation","quality":"low","size":"1024x1024","partial_images":3}]`, 0, 572},
		{"image, a larger size by its pixels", `"max_tool_calls":1,`, `[{"type":"image_generation","quality":"high","size":"3840x2160"}]`, 0, int32(unlistedImageTokens("3840x2160"))},
		{"image, calls past int32", `"max_tool_calls":1000000000,`, `[{"type":"image_generation"}]`, 0, math.MaxInt32},
		{"both", `"max_tool_calls":4,`, `[{"type":"file_search"},{"type":"image_generation","quality":"low","size":"1024x1024"}]`, 4, 4 * 272},
	} {
		body := `{"model":"gpt-4o-mini",` + tc.extra + `"input":"hi","max_output_tokens":10,"tools":` + tc.tools + `}`
		est := w.Weigh(KindResponses, []byte(body))
		if !est.Parsed || est.FileSearches != tc.files || est.ImageTokens != tc.image {
			t.Errorf("%s: parsed %v, %d file searches, %d image tokens; want %d and %d", tc.name, est.Parsed, est.FileSearches,
				est.ImageTokens, tc.files, tc.image)
		}
	}
	for _, tc := range []struct {
		name, tools string
		want        uint16
	}{
		{"code execution", `[{"type":"code_execution_20250825","name":"code_execution"}]`, 60},
		{"older code execution", `[{"type":"code_execution_20250522","name":"code_execution"}]`, 60},
		{"beside web search", `[{"type":"web_search_20250305","name":"web_search"},{"type":"code_execution_20260120","name":"code_execution"}]`, 60},
		{"bash client tool", `[{"type":"bash_20250124","name":"bash"}]`, 0},
		{"custom tool named code_execution", `[{"name":"code_execution","input_schema":{"type":"object"}}]`, 0},
	} {
		body := `{"model":"claude-sonnet-4-5","max_tokens":10,"messages":[{"role":"user","content":"hi"}],"tools":` + tc.tools + `}`
		if est := w.Weigh(KindMessages, []byte(body)); !est.Parsed || est.CodeExecutionMinutes != tc.want {
			t.Errorf("%s: parsed %v, %d minutes; want %d", tc.name, est.Parsed, est.CodeExecutionMinutes, tc.want)
		}
	}
	chat := `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"image_generation"},{"type":"file_search"}]}`
	if est := w.Weigh(KindChat, []byte(chat)); est.FileSearches != 0 || est.ImageTokens != 0 || est.CodeExecutionMinutes != 0 {
		t.Errorf("chat: %+v; want no hosted fee", est)
	}
}

// responsesAnswer is a Responses answer whose output holds items and
// whose top level adds extra (a leading comma included).
func responsesAnswer(items, extra string) string {
	return `{"id":"r","object":"response","status":"completed","output":[` + items + `],"usage":{"input_tokens":5,"output_tokens":7,"total_tokens":12}` + extra + `}`
}

// imageItem is an image_generation_call output item of fields (a leading
// comma included, or "").
func imageItem(fields string) string {
	return `{"type":"image_generation_call","id":"ig","status":"completed","result":"aGk="` + fields + `}`
}

// TestImageTokensSettledFromTheAnswer: a Responses answer is charged the
// image tokens of its image_generation_call items, each by its own size
// and quality (the dearest when it names none), or its
// tool_usage.image_gen input plus output tokens when more; a stream adds
// 100 for each partial image event before its terminal event.
func TestImageTokensSettledFromTheAnswer(t *testing.T) {
	for _, tc := range []struct {
		name, items, extra string
		want               int32
	}{
		{"no image", `{"type":"message","id":"m","role":"assistant","content":[]}`, ``, 0},
		{"one low square", imageItem(`,"size":"1024x1024","quality":"low"`), ``, 272},
		{"two, high and medium", imageItem(`,"size":"1024x1536","quality":"high"`) + `,` + imageItem(`,"size":"1536x1024","quality":"medium"`), ``, 6240 + 1568},
		{"no size or quality", imageItem(``), ``, 6240},
		{"tool_usage above the items", imageItem(`,"size":"1024x1024","quality":"low"`), `,"tool_usage":{"image_gen":{"input_tokens":50,"output_tokens":4160}}`, 4210},
		{"tool_usage below the items", imageItem(`,"size":"1024x1024","quality":"high"`), `,"tool_usage":{"image_gen":{"input_tokens":1,"output_tokens":2}}`, 4160},
		{"tool_usage alone", ``, `,"tool_usage":{"image_gen":{"input_tokens":10,"output_tokens":272}}`, 282},
		{"tool_usage past int32", ``, `,"tool_usage":{"image_gen":{"input_tokens":1e300,"output_tokens":5}}`, math.MaxInt32},
	} {
		body := responsesAnswer(tc.items, tc.extra)
		u, ok := ParseResponsesUsage([]byte(body))
		if !ok || u.ImageTokens != tc.want {
			t.Errorf("%s (json): ok %v, %d image tokens, want %d", tc.name, ok, u.ImageTokens, tc.want)
		}
		s := NewStream(KindResponses)
		for i := range 2 {
			s.Event(nil, []byte(`{"type":"response.image_generation_call.partial_image","item_id":"ig","output_index":0,"partial_image_index":`+strconv.Itoa(i)+`,"partial_image_b64":"aGk="}`))
		}
		s.Event(nil, []byte(`{"type":"response.completed","response":`+body+`}`))
		want := int32(min(int64(tc.want)+200, math.MaxInt32))
		if su, src := s.Settle(Estimate{}, 0); src != SourceReported || su.ImageTokens != want {
			t.Errorf("%s (stream): %v, %d image tokens, want %d", tc.name, src, su.ImageTokens, want)
		}
	}
}

// FuzzImageTokens: whatever an answer's image items and tool usage say,
// the image tokens charged are at least each item's table figure and the
// reported input plus output (capped at math.MaxInt32), never negative,
// the same in a stream's terminal event; a request's reservation is never
// negative.
func FuzzImageTokens(f *testing.F) {
	f.Add("1024x1024", "low", uint8(1), int64(0), int64(0), `[{"type":"image_generation"}]`)
	f.Add("auto", "auto", uint8(3), int64(10), int64(5000), `[{"type":"image_generation","size":"1536x1024","partial_images":2}]`)
	f.Add("999999x999999", "high", uint8(9), int64(-4), int64(1e15), `[{"type":"image\u005fgeneration","quality":7}]`)
	f.Fuzz(func(t *testing.T, size, quality string, n uint8, in, out int64, tools string) {
		sq := strconv.Quote(size)
		qq := strconv.Quote(quality)
		items := ""
		for i := range int(n % 8) {
			if i > 0 {
				items += ","
			}
			items += imageItem(`,"size":` + sq + `,"quality":` + qq)
		}
		body := responsesAnswer(items, fmt.Sprintf(`,"tool_usage":{"image_gen":{"input_tokens":%d,"output_tokens":%d}}`, in, out))
		u, ok := ParseResponsesUsage([]byte(body))
		if !ok {
			return // a quoted string Go writes that JSON does not read alike
		}
		clamp := func(v int64) int64 { return min(max(v, 0), maxTokens) }
		least := min(max(int64(n%8)*perImageTokens(size, quality), clamp(in)+clamp(out)), math.MaxInt32)
		if u.ImageTokens < 0 || int64(u.ImageTokens) < least {
			t.Fatalf("%d image tokens for %d items of %q %q, reported %d + %d: want at least %d", u.ImageTokens, n%8, size, quality, in, out, least)
		}
		s := NewStream(KindResponses)
		s.Event(nil, []byte(`{"type":"response.completed","response":`+body+`}`))
		if su, _ := s.Settle(Estimate{}, 0); su.ImageTokens != u.ImageTokens {
			t.Fatalf("stream %d image tokens, JSON %d", su.ImageTokens, u.ImageTokens)
		}
		w := testWeigher(t)
		req := `{"model":"gpt-4o-mini","stream":true,"input":"hi","tools":` + tools + `}`
		if est := w.Weigh(KindResponses, []byte(req)); est.ImageTokens < 0 || est.FileSearches < 0 {
			t.Fatalf("%s: %d image tokens, %d file searches reserved", req, est.ImageTokens, est.FileSearches)
		}
	})
}

// TestStreamImageItemsCharged: the image_generation_call items a
// Responses stream's output_item events show are charged where its
// terminal event shows fewer or none comes (a stream cut before it): the
// larger of the added and the done items' tokens, plus 100 a partial
// image. A key named twice is read at its dearer reading.
func TestStreamImageItemsCharged(t *testing.T) {
	item := func(at, fields string) string {
		return `{"type":"response.output_item.` + at + `","output_index":0,"item":{"type":"image_generation_call","id":"ig"` + fields + `}}`
	}
	const low = `,"size":"1024x1024","quality":"low"`
	partial := `{"type":"response.image_generation_call.partial_image","item_id":"ig","output_index":0,"partial_image_index":0,"partial_image_b64":"aGk="}`
	terminal := func(items string) string {
		return `{"type":"response.completed","response":` + responsesAnswer(items, ``) + `}`
	}
	for _, tc := range []struct {
		name   string
		events []string
		source Source
		want   int32
	}{
		{"cut after an added item naming no size", []string{item("added", ``)}, SourceCounted, 6240},
		{"cut after added and done", []string{item("added", ``), partial, item("done", low)}, SourceCounted, 272 + 100},
		{"cut after two added, one done", []string{item("added", ``), item("done", low), item("added", low)}, SourceCounted, 272 + 6240},
		{"terminal after an added item naming no size", []string{item("added", ``), item("done", low), terminal(imageItem(low))}, SourceReported, 272},
		{"cut after a done item", []string{item("done", low), item("done", low)}, SourceCounted, 2 * 272},
		{"terminal output listing none", []string{item("added", low), item("done", low), terminal(``)}, SourceReported, 272},
		{"terminal output listing more", []string{item("done", low), partial, terminal(imageItem(low) + `,` + imageItem(low))}, SourceReported, 2*272 + 100},
		{"no image item", []string{`{"type":"response.output_item.done","output_index":0,"item":{"type":"message","id":"m","role":"assistant","content":[]}}`}, SourceCounted, 0},
		{"item named twice", []string{`{"type":"response.output_item.done","output_index":0,"item":{"type":"message","id":"m","role":"assistant","content":[]},"item":{"type":"image_generation_call","id":"ig"` + low + `}}`}, SourceCounted, 272},
	} {
		s := NewStream(KindResponses)
		for _, ev := range tc.events {
			s.Event(nil, []byte(ev))
		}
		if u, src := s.Settle(Estimate{InputTokens: 5}, 0); src != tc.source || u.ImageTokens != tc.want {
			t.Errorf("%s: %v, %d image tokens; want %v, %d", tc.name, src, u.ImageTokens, tc.source, tc.want)
		}
	}
}
