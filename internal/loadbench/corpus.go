package loadbench

import (
	"math/rand/v2"
	"strconv"
	"strings"
)

// The request bodies are built from a text pool made once at start-up:
// several hundred KiB of each kind of text an agent sends — English prose,
// prose in other languages, source code, JSON documents — already escaped
// for a JSON string, words separated by spaces. A message's content is a
// nonce and a slice of the pool cut at spaces (a space is never inside an
// escape sequence nor a UTF-8 sequence), so building a body is copying,
// and no two messages are alike.

// textKind is one kind of pooled text.
type textKind uint8

const (
	kindProse textKind = iota
	kindForeign
	kindCode
	kindJSON
	numKinds
)

// poolBytesPerKind is the size, in bytes, of each kind's pooled text.
const poolBytesPerKind = 768 << 10

// textPool holds each kind's escaped text. It is read-only once built and
// safe for concurrent use.
type textPool struct {
	text [numKinds][]byte
}

// newTextPool builds the pool from seed; the same seed gives the same pool.
func newTextPool(seed uint64) *textPool {
	r := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
	p := &textPool{}
	for k := range numKinds {
		var b []byte
		for len(b) < poolBytesPerKind {
			switch k {
			case kindProse:
				b = appendProse(b, r, english, " ", ". ")
			case kindForeign:
				l := foreign[r.IntN(len(foreign))]
				b = appendProse(b, r, l.words, l.sep, l.stop)
			case kindCode:
				b = appendCode(b, r)
			case kindJSON:
				b = appendJSONDoc(b, r)
			}
			b = append(b, ' ')
		}
		p.text[k] = b
	}
	return p
}

// slice returns about n bytes of kind k's text from a random place, cut at
// spaces at both ends (at least one word).
func (p *textPool) slice(r *rand.Rand, k textKind, n int) []byte {
	t := p.text[k]
	n = max(1, min(n, len(t)/2))
	start := r.IntN(len(t) - n - 1)
	for start > 0 && t[start-1] != ' ' {
		start--
	}
	end := start + n
	for end < len(t) && t[end] != ' ' {
		end++
	}
	return t[start:end]
}

func appendProse(b []byte, r *rand.Rand, words []string, sep, stop string) []byte {
	for range 2 + r.IntN(4) { // sentences
		for i := range 5 + r.IntN(12) {
			if i > 0 {
				b = append(b, sep...)
			}
			w := words[r.IntN(len(words))]
			if i == 0 && w[0] >= 'a' && w[0] <= 'z' {
				b = append(b, w[0]-'a'+'A')
				w = w[1:]
			}
			b = append(b, w...)
		}
		b = append(b, stop...)
	}
	return b
}

// appendCode appends a function of a few lines in Go or Python, with
// escaped newlines, tabs and quotes.
func appendCode(b []byte, r *rand.Rand) []byte {
	id := func() string {
		w := idents[r.IntN(len(idents))]
		return idents[r.IntN(len(idents))] + string(w[0]-'a'+'A') + w[1:]
	}
	if r.IntN(2) == 0 {
		b = append(b, "func "+id()+"(ctx context.Context, "+id()+" []byte) (int, error) {\\n"...)
		for range 3 + r.IntN(6) {
			switch r.IntN(4) {
			case 0:
				b = append(b, "\\tif err := "+id()+"(ctx); err != nil {\\n\\t\\treturn 0, fmt.Errorf(\\\""+id()+": %w\\\", err)\\n\\t}\\n"...)
			case 1:
				b = append(b, "\\tfor i := range "+id()+" {\\n\\t\\t"+id()+" += i * "+strconv.Itoa(r.IntN(1000))+"\\n\\t}\\n"...)
			case 2:
				b = append(b, "\\t"+id()+" := map[string]int{\\\""+id()+"\\\": "+strconv.Itoa(r.IntN(99))+"}\\n"...)
			default:
				b = append(b, "\\tlog.Printf(\\\"%s took %v\\\", "+id()+", time.Since(start))\\n"...)
			}
		}
		return append(b, "\\treturn len("+id()+"), nil\\n}\\n"...)
	}
	b = append(b, "def "+id()+"(self, "+id()+": list[str]) -> dict:\\n"...)
	for range 3 + r.IntN(6) {
		switch r.IntN(3) {
		case 0:
			b = append(b, "    for item in "+id()+":\\n        self."+id()+"[item] = "+strconv.Itoa(r.IntN(500))+"\\n"...)
		case 1:
			b = append(b, "    if not "+id()+":\\n        raise ValueError(f\\\"missing {"+id()+"!r}\\\")\\n"...)
		default:
			b = append(b, "    "+id()+" = json.loads(payload[\\\""+id()+"\\\"])  # "+english[r.IntN(len(english))]+"\\n"...)
		}
	}
	return append(b, "    return {\\\"status\\\": \\\"ok\\\"}\\n"...)
}

// appendJSONDoc appends a small JSON object, as a tool would return it,
// escaped for a JSON string, with spaces after separators.
func appendJSONDoc(b []byte, r *rand.Rand) []byte {
	b = append(b, "{\\\"id\\\": "...)
	b = strconv.AppendInt(b, r.Int64N(1e9), 10)
	b = append(b, ", \\\"name\\\": \\\""+idents[r.IntN(len(idents))]+"\\\", \\\"tags\\\": ["...)
	for i := range 1 + r.IntN(4) {
		if i > 0 {
			b = append(b, ", "...)
		}
		b = append(b, "\\\""+english[r.IntN(len(english))]+"\\\""...)
	}
	b = append(b, "], \\\"score\\\": "...)
	b = strconv.AppendFloat(b, r.Float64(), 'f', 4, 64)
	b = append(b, ", \\\"active\\\": "...)
	b = strconv.AppendBool(b, r.IntN(2) == 0)
	b = append(b, ", \\\"note\\\": \\\""...)
	for i := range 3 + r.IntN(8) {
		if i > 0 {
			b = append(b, ' ')
		}
		b = append(b, english[r.IntN(len(english))]...)
	}
	return append(b, "\\\"}"...)
}

var english = strings.Fields(`the a token bucket refills at a steady rate while each request
takes its cost and the proxy answers with retry after when the budget is spent
deploy service latency cache window tenant user model prompt completion stream
review change function error return value config limit quota reset month day
customer invoice report summary table column index query migration schema
please could you explain why this fails after upgrade and how should we fix it
kubernetes cluster node pod container memory cpu throttled restart probe
meeting notes action items owner deadline follow up decision risk estimate`)

// foreign holds word lists of other languages, with their word separator
// and sentence end (ending in a space, so the pool can be cut there).
var foreign = []struct {
	words     []string
	sep, stop string
}{
	{strings.Fields(`le la les un une des limite de débit jeton requête réponse serveur
		client budget mois facture erreur pourquoi comment nous devons corriger ce problème
		avant la mise en production avec une latence plus faible`), " ", ". "},
	{strings.Fields(`der die das ein eine Anfrage Antwort Grenze Kontingent Monat Rechnung
		Fehler warum wie müssen wir diesen Dienst vor dem Start beheben mit geringer
		Latenz und höherem Durchsatz`), " ", ". "},
	{strings.Fields(`el la los una solicitud respuesta límite de tasa presupuesto mes factura
		error por qué cómo debemos corregir este servicio antes del lanzamiento`), " ", ". "},
	{strings.Fields(`запрос ответ лимит бюджет месяц счёт ошибка почему как нужно исправить
		этот сервис до запуска с меньшей задержкой и большей пропускной способностью`), " ", ". "},
	{strings.Fields(`リクエスト レスポンス 制限 予算 今月 請求書 エラー なぜ どのように
		このサービスを 修正する 必要があります 遅延 スループット`), "", "。 "},
	{strings.Fields(`请求 响应 速率 限制 预算 本月 账单 错误 为什么 如何 我们 需要 修复
		这个 服务 上线 之前 延迟 吞吐量`), "", "。 "},
}

var idents = strings.Fields(`bucket limit tenant quota window rate cost usage model stream
chunk reader writer buffer cache store key value index batch worker queue job
request response header body token price budget ledger report user account`)
