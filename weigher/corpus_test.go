package weigher

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
)

// Generators of mixed text for the differential tests: prose, code, JSON,
// CJK, emoji and special-token strings, random but reproducible from a seed.
// No generated text holds a run of one character class longer than
// maxRunBytes (natural text has none; countText cuts such runs), nor invalid
// UTF-8 (tiktoken-go's regexp2 patterns backtrack badly on runs of U+FFFD).

var (
	syllables = []string{"ka", "to", "ri", "men", "sel", "qua", "tor", "in", "ex", "pra", "lo", "ve", "str", "ang",
		"ble", "ion", "ous", "ing", "ed", "ph", "th", "ch", "wh", "ea", "ou", "ai", "ck", "ght"}
	connectives = []string{"the", "a", "of", "and", "to", "in", "is", "that", "it's", "we're", "don't", "they'll",
		"I'd", "you've", "HTTP", "JSON", "McDonald", "iPhone", "naïve", "café", "Ünïcödé", "résumé", "São", "Zürich"}
	cjkRunes   = []rune("的一是不了人我在有他这中大来上个国到说们为子和你地出道也时年得就那要下以生会自之着去过家学对可她里后小么心多天而能好都然没日于起还发成事只作当想看文无开手十用主行方又如前所本见经头面公同三已老从动两长知民样现分将外但身些与高意进把法此实回二理美点月明其种声全工己话儿者向情部正名定女问力机给等几很业最间新什打便位因重被走电四第门相次东政海口使教西再平真听世气信北少关并内加化由却代军产入先山五太水万市眼体别处总才场师书比住员九笑性通目华报立马命张活难神数件安表原车白应路期叫死常提感金何更反合放做系计或司利受光王果亲界及今京务制解各任至清物台象记边共风战干接它许八特觉望直服毛林题建南度统色字请交爱让认算论百吃义科怎元社术结六功指思非流每青管夫连远资队跟带花快条院变联言权往展该领传近留红治决周保达办运武半候七必城父强步完革深区即求品士转量空甚众技轻程告江语英基派满式李息写呢识极令黄德收脸钱党倒未持取设始版双历越史商千片容研像找友孩站广改议形委早房音火际则首单据导影失拿网香似斯专石若兵弟谁校读志飞观争究包组造落视济喜离虽坏兴切")
	kanaRunes  = []rune("あいうえおかきくけこさしすせそたちつてとなにぬねのはひふへほまみむめもやゆよらりるれろわをんアイウエオカキクケコサシスセソタチツテト")
	cjkPunct   = []string{"，", "。", "、", "！", "？", "：", "「", "」", "（", "）", " ", "\n"}
	emojiPool  = []string{"😀", "👍🏽", "🚀", "❤️", "👩‍💻", "🇫🇷", "✅", "🔥", "🤖", "📈", "👨‍👩‍👧‍👦", "☕", "🎉"}
	specials   = []string{"<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>", "<|endofprompt|>", "<|start|>", "<|message|>"}
	codeTokens = []string{"func", "return", "if", "err", "!=", "nil", "{", "}", "(", ")", ":=", "for", "range", "def", "self", "import", "class", "lambda", "=>", "const", "let", "0x1f", "3.14159", "[]byte", "map[string]int", "fmt.Errorf", "ctx", "\"%s\"", "//", "#", "->", "&&", "||", "<<", ">>=", "async", "await", "None", "True", "42", "1e-9"}
)

// word is a random made-up word of one to four syllables, sometimes
// capitalised.
func word(r *rand.Rand) string {
	if r.IntN(4) == 0 {
		return connectives[r.IntN(len(connectives))]
	}
	var b strings.Builder
	for range 1 + r.IntN(4) {
		b.WriteString(syllables[r.IntN(len(syllables))])
	}
	w := b.String()
	switch r.IntN(10) {
	case 0:
		return strings.ToUpper(w[:1]) + w[1:]
	case 1:
		return strings.ToUpper(w)
	}
	return w
}

func prose(r *rand.Rand, n int) string {
	var b strings.Builder
	for b.Len() < n {
		for i := range 5 + r.IntN(15) {
			if i > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(word(r))
			if r.IntN(12) == 0 {
				b.WriteString([]string{",", ";", " —", ":", " (see 4.2)", " 1,234"}[r.IntN(6)])
			}
		}
		b.WriteString([]string{". ", "! ", "? ", ".\n", ".\n\n", "...\n"}[r.IntN(6)])
	}
	return b.String()
}

func code(r *rand.Rand, n int) string {
	var b strings.Builder
	indent := 0
	for b.Len() < n {
		b.WriteString(strings.Repeat("\t", indent))
		for i := range 2 + r.IntN(8) {
			if i > 0 {
				b.WriteByte(' ')
			}
			if r.IntN(3) == 0 {
				b.WriteString(word(r))
			} else {
				b.WriteString(codeTokens[r.IntN(len(codeTokens))])
			}
		}
		b.WriteString([]string{"\n", " {\n", "\n}\n", ";\n", "\r\n", "  // " + word(r) + "\n"}[r.IntN(6)])
		indent = (indent + r.IntN(3) - 1 + 4) % 4
	}
	return b.String()
}

func jsonText(r *rand.Rand, n int) string {
	var b strings.Builder
	for b.Len() < n {
		obj := map[string]any{}
		for range 1 + r.IntN(6) {
			switch r.IntN(5) {
			case 0:
				obj[word(r)] = r.IntN(100000)
			case 1:
				obj[word(r)] = r.Float64() * 1000
			case 2:
				obj[word(r)] = []string{word(r), word(r)}
			case 3:
				obj[word(r)] = map[string]any{word(r): r.IntN(2) == 0, "id": fmt.Sprintf("%x", r.Uint64())}
			default:
				obj[word(r)] = prose(r, 20+r.IntN(60))
			}
		}
		var j []byte
		if r.IntN(2) == 0 {
			j, _ = json.MarshalIndent(obj, "", "  ")
		} else {
			j, _ = json.Marshal(obj)
		}
		b.Write(j)
		b.WriteByte('\n')
	}
	return b.String()
}

func cjk(r *rand.Rand, n int) string {
	var b strings.Builder
	for b.Len() < n {
		pool := cjkRunes
		if r.IntN(3) == 0 {
			pool = kanaRunes
		}
		for range 3 + r.IntN(25) { // at most 27 runes: well under maxRunBytes
			b.WriteRune(pool[r.IntN(len(pool))])
		}
		b.WriteString(cjkPunct[r.IntN(len(cjkPunct))])
		if r.IntN(8) == 0 {
			b.WriteString(word(r))
			b.WriteString(cjkPunct[r.IntN(len(cjkPunct))])
		}
	}
	return b.String()
}

func emojiText(r *rand.Rand, n int) string {
	var b strings.Builder
	for b.Len() < n {
		b.WriteString(word(r))
		b.WriteByte(' ')
		for range r.IntN(3) {
			b.WriteString(emojiPool[r.IntN(len(emojiPool))])
		}
		if r.IntN(5) == 0 {
			b.WriteString(specials[r.IntN(len(specials))])
		}
		b.WriteString([]string{" ", "\n", "! ", ", "}[r.IntN(4)])
	}
	return b.String()
}

// mixedText is n bytes or a little more of one kind of text picked at
// random: prose, code, JSON, CJK or emoji with special-token strings.
func mixedText(r *rand.Rand, n int) string {
	switch r.IntN(5) {
	case 0:
		return prose(r, n)
	case 1:
		return code(r, n)
	case 2:
		return jsonText(r, n)
	case 3:
		return cjk(r, n)
	default:
		return emojiText(r, n)
	}
}

// mixedCorpus is total bytes of mixed text, in pieces of 100 bytes to 6
// KiB.
func mixedCorpus(seed uint64, total int) []string {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	var out []string
	for n := 0; n < total; {
		s := mixedText(r, 100+r.IntN(6<<10))
		out = append(out, s)
		n += len(s)
	}
	return out
}
