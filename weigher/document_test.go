package weigher

import (
	"archive/zip"
	"bytes"
	"compress/zlib"
	"encoding/base64"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// pdfSpec describes a test PDF: pdfOf writes pages page objects, each
// spelling its type as "/Type" + gap(i) + "/Page" (gap nil: one space),
// the page tree root with /Count count (-1: the page count), and junk(i)
// (nil: none) on a line of its own before object i.
type pdfSpec struct {
	pages, count int
	gap          func(i int) string
	junk         func(i int) []byte
	noType       bool // page objects carry no /Type at all
}

// pdfOf writes spec as an uncompressed PDF.
func pdfOf(spec pdfSpec) []byte {
	var b bytes.Buffer
	count := spec.count
	if count < 0 {
		count = spec.pages
	}
	b.WriteString("%PDF-1.4\n%\xe2\xe3\xcf\xd3\n1 0 obj\n<< /Type /Catalog /Pages 2 0 R >>\nendobj\n")
	fmt.Fprintf(&b, "2 0 obj\n<< /Type /Pages /Kids [")
	for i := range spec.pages {
		fmt.Fprintf(&b, " %d 0 R", 3+2*i)
	}
	fmt.Fprintf(&b, " ] /Count %d >>\nendobj\n", count)
	for i := range spec.pages {
		if spec.junk != nil {
			b.Write(spec.junk(i))
			b.WriteByte('\n')
		}
		typ := "/Type /Page "
		if spec.gap != nil {
			typ = "/Type" + spec.gap(i) + "/Page "
		}
		if spec.noType {
			typ = ""
		}
		fmt.Fprintf(&b, "%d 0 obj\n<< %s/Parent 2 0 R /MediaBox [0 0 612 792] /Contents %d 0 R >>\nendobj\n", 3+2*i, typ, 4+2*i)
		s := fmt.Sprintf("BT /F1 12 Tf 72 720 Td (page %d) Tj ET", i+1)
		fmt.Fprintf(&b, "%d 0 obj\n<< /Length %d >>\nstream\n%s\nendstream\nendobj\n", 4+2*i, len(s), s)
	}
	b.WriteString("trailer\n<< /Root 1 0 R >>\n%%EOF\n")
	return b.Bytes()
}

// objStmPDF is a PDF 1.5 file of pages pages whose page tree and page
// objects all sit in one Flate-compressed object stream.
func objStmPDF(pages int) []byte { return objStmPDFOf(pages, zlib.DefaultCompression, "") }

// objStmPDFOf is objStmPDF with its object stream compressed at zlib level
// level (rawStream: not compressed) and extra written after its objects.
func objStmPDFOf(pages, level int, extra string) []byte {
	var objs, offsets bytes.Buffer
	kids := make([]string, pages)
	for i := range pages {
		kids[i] = fmt.Sprintf("%d 0 R", 3+i)
	}
	add := func(num int, body string) {
		fmt.Fprintf(&offsets, "%d %d ", num, objs.Len())
		objs.WriteString(body + "\n")
	}
	add(2, "<< /Type /Pages /Kids ["+strings.Join(kids, " ")+fmt.Sprintf("] /Count %d >>", pages))
	for i := range pages {
		add(3+i, "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] >>")
	}
	var z bytes.Buffer
	filter := ""
	objs.WriteString(extra)
	if level != rawStream {
		zw, _ := zlib.NewWriterLevel(&z, level)
		zw.Write(append(offsets.Bytes(), objs.Bytes()...))
		zw.Close()
		filter = "/Filter /FlateDecode "
	} else {
		z.Write(append(offsets.Bytes(), objs.Bytes()...))
	}
	var b bytes.Buffer
	b.WriteString("%PDF-1.5\n1 0 obj\n<< /Type /Catalog /Pages 2 0 R >>\nendobj\n")
	fmt.Fprintf(&b, "%d 0 obj\n<< /Type /ObjStm /N %d /First %d %s/Length %d >>\nstream\n", 3+pages, pages+1, offsets.Len(), filter, z.Len())
	b.Write(z.Bytes())
	b.WriteString("\nendstream\nendobj\n%%EOF\n")
	return b.Bytes()
}

// rawStream is objStmPDFOf's level for an object stream not compressed.
const rawStream = -100

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

// Every legal spelling of "/Type /Page" is a page (finding 1): PDF
// whitespace of any kind and length, comments, name escapes; and the page
// tree's /Count counts when the page objects do not show.
func TestPDFPageSpellings(t *testing.T) {
	const pages = 100
	for _, c := range []struct {
		name string
		spec pdfSpec
	}{
		{"plain", pdfSpec{pages: pages, count: -1}},
		{"5 spaces", pdfSpec{pages: pages, count: 0, gap: func(int) string { return "     " }}},
		{"NUL", pdfSpec{pages: pages, count: 0, gap: func(int) string { return "\x00" }}},
		{"no gap", pdfSpec{pages: pages, count: 0, gap: func(int) string { return "" }}},
		{"all whitespace kinds", pdfSpec{pages: pages, count: 0, gap: func(int) string { return "\x00\t\n\f\r \r\n" }}},
		{"64 blanks", pdfSpec{pages: pages, count: 0, gap: func(int) string { return strings.Repeat(" ", 64) }}},
		{"comment", pdfSpec{pages: pages, count: 0, gap: func(int) string { return " % a comment /Type /Pages\n" }}},
		{"comments, CR ends", pdfSpec{pages: pages, count: 0, gap: func(int) string { return "%a\r%b (\n\f" }}},
		{"comment after string", pdfSpec{pages: pages, count: 0}},
		{"escaped Page", pdfSpec{pages: pages, count: 0, gap: func(int) string { return " /P#61g#65 " }}},
		{"escaped Type", pdfSpec{pages: pages, count: 0, gap: func(i int) string { return " " }}},
		{"junk strings and brackets", pdfSpec{pages: pages, count: 0, junk: func(i int) []byte { return []byte("( << [ % /Type") }}},
		{"count only", pdfSpec{pages: pages, count: -1, noType: true}},
	} {
		doc := pdfOf(c.spec)
		if c.name == "escaped Type" {
			doc = bytes.ReplaceAll(doc, []byte("/Type /Page "), []byte("/#54yp#65 /Page "))
		}
		if c.name == "comment after string" {
			doc = bytes.ReplaceAll(doc, []byte("<< /Type /Page "), []byte("<< /T (%) /Type /Page "))
		}
		if c.name == "escaped Page" {
			doc = bytes.ReplaceAll(doc, []byte("/Type /P#61g#65 /Page "), []byte("/Type /P#61g#65 "))
		}
		if got := pdfPages(b64(doc)); got != pages {
			t.Errorf("%s: %d pages, want %d", c.name, got, pages)
		}
	}
}

// weighCase is one request weighed end to end, with the input llmguard
// must reserve at least (min) and whether it must be a partial estimate.
type weighCase struct {
	name    string
	kind    Kind
	body    string
	min     int64
	partial bool
}

func runWeighCases(t *testing.T, w *Weigher, cases []weighCase) {
	t.Helper()
	for _, c := range cases {
		e := w.Weigh(c.kind, []byte(c.body))
		if !e.Parsed || e.InputTokens < c.min || e.ServerContext != c.partial {
			t.Errorf("%s: input %d tokens, partial %v; want at least %d, partial %v", c.name, e.InputTokens, e.ServerContext, c.min, c.partial)
		}
	}
}

// Finding 1 end to end: a 100-page PDF spelled "/Type     /Page" is weighed
// as 100 pages in an Anthropic document block, a chat file part and a
// Responses input_file, and so is one with its pages in a compressed object
// stream; one whose object stream cannot be read reserves the model's
// largest input as a partial estimate.
func TestDocumentPagesReserved(t *testing.T) {
	w := testWeigher(t)
	sp5 := b64(pdfOf(pdfSpec{pages: 100, count: 0, gap: func(int) string { return "     " }}))
	stm := b64(objStmPDF(100))
	lzw := b64(bytes.Replace(objStmPDF(100), []byte("/FlateDecode"), []byte("/LZWDecode"), 1))
	claudePages := int64(100 * (pageTextTokens + claudeMaxImageTokens))
	openaiPages := 100 * (pageTextTokens + imageTokens("gpt-4o", "high", 0, 0))
	doc := func(data string) string {
		return `{"model":"claude-sonnet-4-5","max_tokens":5,"messages":[{"role":"user","content":[{"type":"document","source":{"type":"base64","media_type":"application/pdf","data":"` + data + `"}}]}]}`
	}
	chat := func(data string) string {
		return `{"model":"gpt-4o","messages":[{"role":"user","content":[{"type":"file","file":{"filename":"a.pdf","file_data":"data:application/pdf;base64,` + data + `"}}]}]}`
	}
	resp := func(data string) string {
		return `{"model":"gpt-4o","input":[{"role":"user","content":[{"type":"input_file","filename":"a.pdf","file_data":"data:application/pdf;base64,` + data + `"}]}]}`
	}
	runWeighCases(t, w, []weighCase{
		{"document, 5 spaces", KindMessages, doc(sp5), claudePages, false},
		{"chat file, 5 spaces", KindChat, chat(sp5), openaiPages, false},
		{"input_file, 5 spaces", KindResponses, resp(sp5), openaiPages, false},
		{"document, object stream", KindMessages, doc(stm), claudePages, false},
		{"chat file, object stream", KindChat, chat(stm), openaiPages, false},
		{"input_file, object stream", KindResponses, resp(stm), openaiPages, false},
		{"document, unreadable object stream", KindMessages, doc(lzw), DefaultMaxInputTokens, true},
		{"chat file, unreadable object stream", KindChat, chat(lzw), DefaultMaxInputTokens, true},
		{"input_file, unreadable object stream", KindResponses, resp(lzw), DefaultMaxInputTokens, true},
	})
}

// Finding 2: a text file sent as input_file is weighed as its text (at
// least what the same text weighs as input_text); a .docx (a zip of
// compressed XML) cannot be weighed from its bytes and reserves the
// model's largest input as a partial estimate.
func TestInputFileTextAndOffice(t *testing.T) {
	w := testWeigher(t)
	rng := rand.New(rand.NewPCG(1, 2))
	words := strings.Fields("the quick brown fox jumps over lazy dog while wizards judge boxing")
	var en strings.Builder
	for en.Len() < 400_000 {
		fmt.Fprintf(&en, "%s%d ", words[rng.IntN(len(words))], rng.IntN(100000))
	}
	var cjk strings.Builder
	for range 100_000 {
		cjk.WriteRune(rune(0x4e00 + rng.IntN(20000)))
	}
	var z bytes.Buffer
	zw := zip.NewWriter(&z)
	f, _ := zw.Create("word/document.xml")
	f.Write([]byte(`<w:document><w:body><w:p><w:r><w:t>` + en.String() + `</w:t></w:r></w:p></w:body></w:document>`))
	zw.Close()
	file := func(name, mime string, data []byte) string {
		return `{"model":"gpt-4o","input":[{"role":"user","content":[{"type":"input_file","filename":"` + name + `","file_data":"data:` + mime + `;base64,` + b64(data) + `"}]}]}`
	}
	asText := func(s string) int64 {
		body := `{"model":"gpt-4o","input":[{"role":"user","content":[{"type":"input_text","text":"` + s + `"}]}]}`
		return w.Weigh(KindResponses, []byte(body)).InputTokens
	}
	runWeighCases(t, w, []weighCase{
		{"english .txt", KindResponses, file("a.txt", "text/plain", []byte(en.String())), asText(en.String()), false},
		{"CJK .txt", KindResponses, file("c.txt", "text/plain", []byte(cjk.String())), asText(cjk.String()), false},
		{".docx", KindResponses, file("a.docx", "application/vnd.openxmlformats-officedocument.wordprocessingml.document", z.Bytes()), DefaultMaxInputTokens, true},
		{"binary", KindResponses, file("a.bin", "application/octet-stream", []byte{0, 1, 2, 0xff}), DefaultMaxInputTokens, true},
		{"chat .txt", KindChat, `{"model":"gpt-4o","messages":[{"role":"user","content":[{"type":"file","file":{"filename":"a.txt","file_data":"data:text/plain;base64,` + b64([]byte(en.String())) + `"}}]}]}`, asText(en.String()), false},
	})
	// A PDF header on a text file: weighed as the larger of both readings.
	fake := "%PDF-1.4\n<< /Type /Page >>\n" + en.String()
	runWeighCases(t, w, []weighCase{{"text behind a PDF header", KindResponses, file("a.txt", "text/plain", []byte(fake)), asText(en.String()), false}})
}

// Finding 3: chat content parts of types llmguard does not know (remote
// video or audio an OpenAI-compatible upstream fetches) reserve the model's
// largest input as a partial estimate; so do unknown Responses parts.
func TestUnknownMediaPartsArePartial(t *testing.T) {
	w := testWeigher(t)
	runWeighCases(t, w, []weighCase{
		{"video_url", KindChat, `{"model":"gpt-4o","messages":[{"role":"user","content":[{"type":"text","text":"describe"},{"type":"video_url","video_url":{"url":"https://x/v.mp4"}}]}]}`, DefaultMaxInputTokens, true},
		{"audio_url", KindChat, `{"model":"gpt-4o","messages":[{"role":"user","content":[{"type":"audio_url","audio_url":{"url":"https://x/a.wav"}}]}]}`, DefaultMaxInputTokens, true},
		{"responses input_video", KindResponses, `{"model":"gpt-4o","input":[{"role":"user","content":[{"type":"input_video","video_url":"https://x/v.mp4"}]}]}`, DefaultMaxInputTokens, true},
		{"messages: an unknown block", KindMessages, `{"model":"claude-sonnet-4-6","max_tokens":1,"messages":[{"role":"user","content":[{"type":"text","text":"describe"},{"type":"video","source":{"type":"url","url":"https://x/v.mp4"}}]}]}`, DefaultMaxInputTokens, true},
		{"messages: known blocks stay exact", KindMessages, `{"model":"claude-sonnet-4-6","max_tokens":1,"messages":[{"role":"user","content":[{"type":"text","text":"hi"},{"type":"tool_result","tool_use_id":"t","content":"r"}]}]}`, 1, false},
		{"known parts stay exact", KindChat, `{"model":"gpt-4o","messages":[{"role":"user","content":[{"type":"text","text":"hi"},{"type":"image_url","image_url":{"url":"https://x/a.png","detail":"low"}}]}]}`, 1, false},
	})
}

// Spreadsheets are read by OpenAI's spreadsheet flow (first rows plus a
// model-written summary): weighed as their text and partial.
func TestInputFileSpreadsheetIsPartial(t *testing.T) {
	w := testWeigher(t)
	csv := b64([]byte("a,b\n1,2\n"))
	runWeighCases(t, w, []weighCase{
		{".csv by name", KindResponses, `{"model":"gpt-4o","input":[{"role":"user","content":[{"type":"input_file","filename":"t.CSV","file_data":"data:application/octet-stream;base64,` + csv + `"}]}]}`, DefaultMaxInputTokens, true},
		{"csv by type", KindResponses, `{"model":"gpt-4o","input":[{"role":"user","content":[{"type":"input_file","file_data":"data:text/csv;base64,` + csv + `"}]}]}`, DefaultMaxInputTokens, true},
		{".txt stays exact", KindResponses, `{"model":"gpt-4o","input":[{"role":"user","content":[{"type":"input_file","filename":"t.txt","file_data":"data:text/plain;base64,` + csv + `"}]}]}`, 1, false},
	})
}

// A PDF with no "%PDF-" header (or one past the first 1,024 bytes) is read
// by lenient readers (pypdf by default, pdf.js): declared a PDF by its
// media type or name, or holding page objects, it is weighed by its pages,
// not as the short text its bytes make.
func TestHeaderlessPDFWeighedByPages(t *testing.T) {
	w := testWeigher(t)
	enc := w.encoder("gpt-4o")
	doc := pdfOf(pdfSpec{pages: 50, count: -1})
	i := bytes.Index(doc, []byte("%PDF-"))
	if i < 0 {
		t.Fatal("pdfOf made no header")
	}
	end := i + bytes.IndexByte(doc[i:], '\n') + 1
	headless := append(append([]byte{}, doc[:i]...), doc[end:]...)
	want := documentTokens(50, 1)
	for i, f := range []inlineFile{
		{b64: b64(headless), mime: "application/pdf"},
		{b64: b64(headless), name: "report.PDF"},
		{b64: b64(headless)},
	} {
		// The last, undeclared and not text (the binary comment PDFs
		// start with), is not known for a PDF: partial, which reserves
		// the model's largest input, is enough there.
		if n, hidden := fileTokens(enc, f, 1); n < want && !(i == 2 && hidden) {
			t.Errorf("headerless 50-page PDF (mime %q, name %q): %d tokens, not partial; want at least %d", f.mime, f.name, n, want)
		}
	}
}

// Text holding PDF page objects and no header, undeclared: weighed as the
// larger of its text and its pages.
func TestHeaderlessTextPDFWeighedByPages(t *testing.T) {
	w := testWeigher(t)
	var b strings.Builder
	for i := range 40 {
		fmt.Fprintf(&b, "%d 0 obj\n<< /Type /Page >>\nendobj\n", i+3)
	}
	n, _ := fileTokens(w.encoder("gpt-4o"), inlineFile{b64: b64([]byte(b.String()))}, 1)
	if want := documentTokens(40, 1); n < want {
		t.Errorf("40 page objects as text: %d tokens, want at least %d", n, want)
	}
}

// A PDF (or other media) sent as an image part, as LiteLLM sends PDFs to
// Anthropic, Bedrock and Vertex, is weighed as a document, not one image:
// a PDF data URL by its pages, a .pdf URL and other media as partial.
func TestDocumentInImagePart(t *testing.T) {
	w := testWeigher(t)
	pdf := b64(pdfOf(pdfSpec{pages: 100, count: -1}))
	pages := 100 * (pageTextTokens + imageTokens("gpt-4o", "high", 0, 0))
	runWeighCases(t, w, []weighCase{
		{"chat image_url PDF data URL", KindChat, `{"model":"gpt-4o","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:application/pdf;base64,` + pdf + `"}}]}]}`, pages, false},
		{"chat image_url string PDF data URL", KindChat, `{"model":"gpt-4o","messages":[{"role":"user","content":[{"type":"image_url","image_url":"data:application/pdf;base64,` + pdf + `"}]}]}`, pages, false},
		{"chat image_url .pdf URL", KindChat, `{"model":"gpt-4o","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"https://x/report.PDF?sig=1"}}]}]}`, DefaultMaxInputTokens, true},
		{"chat image_url video data URL", KindChat, `{"model":"gpt-4o","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:video/mp4;base64,AAAAIGZ0eXBpc29t"}}]}]}`, DefaultMaxInputTokens, true},
		{"responses input_image PDF data URL", KindResponses, `{"model":"gpt-4o","input":[{"role":"user","content":[{"type":"input_image","image_url":"data:application/pdf;base64,` + pdf + `"}]}]}`, pages, false},
		{"an image stays an image", KindChat, `{"model":"gpt-4o","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"https://x/cat.png","detail":"low"}}]}]}`, 1, false},
	})
}

// Server features outside "tools": OpenRouter's plugins (web search, file
// parsing) and ":online" models, and tools written as a key of their own
// (Gemini's and LiteLLM's {"googleSearch": {}}), pull input the body does
// not hold: partial. Client tools without a type stay exact.
func TestServerFeaturesOutsideTools(t *testing.T) {
	w := testWeigher(t)
	runWeighCases(t, w, []weighCase{
		{"chat plugins", KindChat, `{"model":"openai/gpt-4o","plugins":[{"id":"web","max_results":25}],"messages":[{"role":"user","content":"hi"}]}`, DefaultMaxInputTokens, true},
		{"responses plugins", KindResponses, `{"model":"openai/gpt-4o","plugins":[{"id":"file-parser"}],"input":"hi"}`, DefaultMaxInputTokens, true},
		{"chat :online", KindChat, `{"model":"openai/gpt-4o:ONLINE","messages":[{"role":"user","content":"hi"}]}`, DefaultMaxInputTokens, true},
		{"chat googleSearch tool", KindChat, `{"model":"gemini-2.5-pro","tools":[{"googleSearch":{}}],"messages":[{"role":"user","content":"hi"}]}`, DefaultMaxInputTokens, true},
		{"chat url_context tool", KindChat, `{"model":"gemini-2.5-pro","tools":[{"url_context":{}}],"messages":[{"role":"user","content":"hi"}]}`, DefaultMaxInputTokens, true},
		{"messages client tool without a type", KindMessages, `{"model":"claude-sonnet-4-5","max_tokens":5,"tools":[{"name":"get_weather","input_schema":{"type":"object"}}],"messages":[{"role":"user","content":"hi"}]}`, 1, false},
		{"chat function tool", KindChat, `{"model":"gpt-4o","tools":[{"type":"function","function":{"name":"f","parameters":{}}}],"messages":[{"role":"user","content":"hi"}]}`, 1, false},
		{"chat plain", KindChat, `{"model":"openai/gpt-4o","messages":[{"role":"user","content":"online"}]}`, 1, false},
	})
}

// Review fixes: a /Count near 2^63 saturates the estimate (the product
// wrapped to a few thousand tokens), and base64 with a byte outside the
// alphabet, which Python's b64decode skips, is partial (a text file behind
// a "*" weighed 9 tokens; a PDF cut at one was one sure page).
func TestDocumentCountAndCorruptBase64(t *testing.T) {
	if got := documentTokens(4149998666751306, 1500); got != maxTokens {
		t.Errorf("documentTokens(4.1e15 pages) = %d, want maxTokens", got)
	}
	w := testWeigher(t)
	enc := w.encoder("gpt-4o")
	text := []byte(strings.Repeat("words of a long text file ", 4000))
	if n, hidden := fileTokens(enc, inlineFile{b64: "*" + b64(text), name: "a.txt"}, 1); !hidden {
		t.Errorf("a text file behind a '*': %d tokens, not partial", n)
	}
	one := pdfOf(pdfSpec{pages: 1, count: -1})
	more := pdfOf(pdfSpec{pages: 60, count: -1})
	if _, sure, _ := pdfPageCount(b64(one) + "*" + b64(more)); sure {
		t.Error("a PDF cut by a byte outside base64: sure")
	}
	big := append(append([]byte{}, one...), bytes.Repeat([]byte("% filler\n"), 8000)...)
	if _, sure, _ := pdfPageCount(b64(big)[:40000] + "*" + b64(more)); sure {
		t.Error("a PDF (streamed) cut by a byte outside base64: sure")
	}
}

// A text file in a Claude document block is Claude text: scaled by the
// model's safety factor like a text source, where it went in unscaled.
func TestClaudeTextFileScaled(t *testing.T) {
	w := testWeigher(t)
	words := strings.Repeat("The grass is green and the sky is blue. ", 200)
	body := func(src string) string {
		return `{"model":"claude-opus-4-7","max_tokens":1,"messages":[{"role":"user","content":[{"type":"document","source":` + src + `}]}]}`
	}
	asText := w.Weigh(KindMessages, []byte(body(`{"type":"text","media_type":"text/plain","data":"`+words+`"}`)))
	asFile := w.Weigh(KindMessages, []byte(body(`{"type":"base64","media_type":"text/plain","data":"`+b64([]byte(words))+`"}`)))
	if asFile.InputTokens < asText.InputTokens {
		t.Errorf("the text as a base64 file: %d tokens, as a text source %d; want at least as many", asFile.InputTokens, asText.InputTokens)
	}
}
