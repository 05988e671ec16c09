package weigher

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

// Text kinds of the cold-counter benchmarks and tests: each generator
// writes about n bytes of one kind of text from a seeded generator, so runs
// are repeatable, and draws from a vocabulary large enough that the text
// does not repeat (a repeating text keeps every lookup in cache).
var textKinds = []struct {
	name string
	gen  func(r *rand.Rand, n int) string
}{
	{"prose", genProse},
	{"code", genCode},
	{"json", genJSON},
	{"cjk", genCJK},
	{"emoji", genEmoji},
}

var proseWords = strings.Fields(`the of and to in is that it for was on are as with his they at be this from
have or by one had not but what all were when we there can an your which their said if do will each about how
up out them then she many some so these would other into has more her two like him see time could no make than
first been its who now people my made over did down only way find use may water long little very after words
called just where most know get through back much before go good new write our used me man too any day same right
look think also around another came come work three word must because does part even place well such here take
why things help put years different away again off went old number great tell men say small every found still
between name should home big give air line set own under read last never us left end along while might next sound
below saw something thought both few those always looked show large often together asked house don't world going
want school important until form food keep children feet land side without boy once animals life enough took
sometimes four head above kind began almost live page got earth need far hand high year mother light parts country
father let night following picture being study second eyes soon times story boys since white days ever paper hard
near sentence better best across during today others however sure means knew it's try told young miles sun ways
thing whole hear example heard several change answer room sea against top turned learn point city play toward five
using himself usually rate limiter reconciliation budget tokenizer encoder upstream reservation refund quota
Kubernetes PostgreSQL asynchronous idempotent serialization throughput latency McDonald's O'Reilly`)

func genProse(r *rand.Rand, n int) string {
	var b strings.Builder
	for b.Len() < n {
		words := 6 + r.IntN(18)
		for i := range words {
			w := proseWords[r.IntN(len(proseWords))]
			if i == 0 {
				w = strings.ToUpper(w[:1]) + w[1:]
			} else {
				b.WriteByte(' ')
			}
			b.WriteString(w)
			if i < words-1 && r.IntN(12) == 0 {
				b.WriteByte(',')
			}
		}
		b.WriteString([]string{". ", ". ", "? ", "! ", ".\n\n", fmt.Sprintf(" (%d%%). ", r.IntN(1000))}[r.IntN(6)])
	}
	return b.String()
}

var codeIdents = strings.Fields(`ctx req resp err buf n i j k key value limit bucket store rule cost tokens now
deadline count total self data result items node parent child left right index offset size capacity rate burst
window quota tenant user model encoder parser scanner reader writer handler client server conn pool cache`)

func genCode(r *rand.Rand, n int) string {
	id := func() string {
		a, b := codeIdents[r.IntN(len(codeIdents))], codeIdents[r.IntN(len(codeIdents))]
		switch r.IntN(3) {
		case 0:
			return a
		case 1:
			return a + strings.ToUpper(b[:1]) + b[1:]
		default:
			return a + "_" + b
		}
	}
	var b strings.Builder
	for b.Len() < n {
		if r.IntN(2) == 0 { // Go
			fmt.Fprintf(&b, "// %s returns the %s of %s.\nfunc (s *%s) %s(%s context.Context, %s int64) (%s, error) {\n",
				id(), id(), id(), strings.ToUpper(id()[:1])+"tore", strings.ToUpper(id()[:1])+id(), id(), id(), id())
			for range 2 + r.IntN(5) {
				switch r.IntN(4) {
				case 0:
					fmt.Fprintf(&b, "\tif %s > s.%s {\n\t\treturn nil, fmt.Errorf(\"%s: %%w\", %s)\n\t}\n", id(), id(), id(), id())
				case 1:
					fmt.Fprintf(&b, "\tfor %s := range %s.%s {\n\t\t%s += %d\n\t}\n", id(), id(), id(), id(), r.IntN(4096))
				case 2:
					fmt.Fprintf(&b, "\t%s := s.%s[%s:%s+%d]\n", id(), id(), id(), id(), r.IntN(64))
				default:
					fmt.Fprintf(&b, "\t%s, err := %s.%s(ctx, %q)\n", id(), id(), id(), id())
				}
			}
			b.WriteString("\treturn result, nil\n}\n\n")
		} else { // Python
			fmt.Fprintf(&b, "def %s(self, %s, %s=None):\n    \"\"\"Return the %s of %s.\"\"\"\n", id(), id(), id(), id(), id())
			for range 2 + r.IntN(5) {
				switch r.IntN(3) {
				case 0:
					fmt.Fprintf(&b, "    if %s is None:\n        raise ValueError(f\"bad {%s!r}\")\n", id(), id())
				case 1:
					fmt.Fprintf(&b, "    for %s in self.%s[%d:]:\n        %s.append(%s * %d)\n", id(), id(), r.IntN(9), id(), id(), r.IntN(100))
				default:
					fmt.Fprintf(&b, "    %s = {%q: %s, %q: [%d, %d]}\n", id(), id(), id(), id(), r.IntN(1000), r.IntN(1000))
				}
			}
			b.WriteString("    return result\n\n")
		}
	}
	return b.String()
}

func genJSON(r *rand.Rand, n int) string {
	var b strings.Builder
	b.WriteString("[")
	for b.Len() < n {
		if b.Len() > 1 {
			b.WriteString(",\n")
		}
		fmt.Fprintf(&b, `{"id":"%016x","%s":%d,"%s":%.4f,"%s":%q,"tags":["%s","%s"],"ok":%v,"nested":{"%s":null}}`,
			r.Uint64(), codeIdents[r.IntN(len(codeIdents))], r.IntN(1e6), codeIdents[r.IntN(len(codeIdents))], r.Float64()*1000,
			codeIdents[r.IntN(len(codeIdents))], proseWords[r.IntN(len(proseWords))]+" "+proseWords[r.IntN(len(proseWords))],
			codeIdents[r.IntN(len(codeIdents))], codeIdents[r.IntN(len(codeIdents))], r.IntN(2) == 0, codeIdents[r.IntN(len(codeIdents))])
	}
	b.WriteString("]")
	return b.String()
}

// cjkChars are common Chinese characters (and some kana): real CJK text
// draws most characters from a few thousand, not from the whole block.
var cjkChars = []rune("的一是不了在人有我他这个们中来上大为和国地到以说时要就出会可也你对生能而子那得于着下自之年过发后作里用道行所然家种事成方多经么去法学如都同现当没动面起看定天分还进好小部其些主样理心她本前开但因只从想实日军者意无力它与长把机十民第公此已工使情明性知全三又关点正业外将两高间由问很最重并物手应战向头文体政美相见被利什二等产或新己制身果加西斯月话合回特代内信表化老给世位次度门任常先海通教儿原东声提立及比员解水名真论处走义各入几口认条平系气题活尔更别打女变四神总何电数安少报才结反受目太量再感建务做接必场件计管期市直德资命山金指克许统区保至队形社便空决治展马科司五基眼书非则听白却界达光放强即像难且权思王象完设式色路记南品住告类求据程北边死张该交规万取拉格望觉术领共确传师观清今切院让识候带导争运笑飞风步改收根干造言联持组每济车亲极林服快办议往元英士证近失转夫令准布始怎呢存未远叫台单影具罗字爱击流备兵连调深商算质团集百需价花党华城石级整府离况亚请技际约示复病息究线似官火断精满支视消越器容照须九增研写称企八功吗包片史委乎查轻易早曾除农找装广显吧阿李标谈吃图念六引历首医局突专费号尽另周较注语仅考落青随选列武红响虽推势参希古众构房半节土投某案黑维革划敌致陈律足态护七兴派孩验责营星够章音跟志底站严巴例防族供效续施留讲型料终答紧黄绝奇察母京段依批群项故按河米围江织害斗双境客纪采举杀攻父苏密低朝友诉止细愿千值仍男钱破网热助倒育属坐帝限船脸职速刻乐否刚威毛状率甚独球般普怕弹校苦创假久错承印晚兰试股拿脑预谁益阳若哪微尼继送急血惊伤素药适波夜省初喜卫源食险待述陆习置居劳财环排福纳欢雷警获模充负云停木游龙树疑层冷洲冲射略范竟句室异激汉村哈策演简卡罪判担州静退既衣您宗积余痛检差富灵协角占配征修皮挥胜降阶审沉坚善妈刘读啊超免压银买皇养伊怀执副乱抗犯追帮宣佛岁航优怪香著田铁控税左右份穿艺背阵草脚概恶块顿敢守酒岛托央户烈洋哥索胡款靠评版宝座释景顾弟登货互付伯慢欧换闻危忙核暗姐介坏讨丽良序升监临亮露永呼味野架域沙掉括舰鱼杂误湾吉减编楚肯测败屋跑梦散温困剑渐封救贵枪缺楼县尚毫移娘朋画班智亦耳恩短掌恐遗固席松秘谢鲁遇康虑幸均销钟诗藏赶剧票损忽巨炮旧端探湖录叶春乡附吸予礼港雨呀板庭妇归睛饭额含顺输摇招婚脱补谓督毒油疗旅泽材灭逐莫笔亡鲜词圣择寻厂睡博勒烟授诺伦岸奥唐卖俄炸载洛健堂旁宫喝借君禁阴园谋宋避抓荣姑孙逃牙束跳顶玉镇雪午练迫爷篇肉嘴馆遍凡础洞卷坦牛宁纸诸训私庄祖丝翻暴森塔默握戏隐熟骨访弱蒙歌店鬼软典欲萨伙遭盘爸扩盖弄雄稳忘亿刺拥徒姆杨齐赛趣曲刀床迎冰虚玩析窗醒妻透购替塞努休虎扬途侵刑绿兄迅套贸毕唯谷轮库迹尤竞街促延震弃甲伟麻川申缓潜闪售灯针哲络抵朱埃抱鼓植纯夏忍页杰筑折郑贝尊吴秀混臣雅振染盛怒舞圆搞狂措姓残秋培迷诚宽宇猛摆梅毁伸摩盟末乃悲拍丁赵侧港ひらがなカタカナ日本語のテキストです")

func genCJK(r *rand.Rand, n int) string {
	var b strings.Builder
	for b.Len() < n {
		for range 8 + r.IntN(30) {
			b.WriteRune(cjkChars[r.IntN(len(cjkChars))])
		}
		b.WriteString([]string{"，", "。", "、", "；", "！", "？", "。\n", " 2024年", "（API）"}[r.IntN(9)])
	}
	return b.String()
}

var emojis = []rune("😀😂🥲😍🤔👍🏽🙏🔥🚀✨🎉💯❤️✅❌⚠️🌍📈🤖🧠👀")

func genEmoji(r *rand.Rand, n int) string {
	var b strings.Builder
	accented := strings.Fields("café naïve résumé Zürich São Ångström señor façade coöperate Łódź Ελλάδα Москва привет")
	for b.Len() < n {
		switch r.IntN(4) {
		case 0:
			b.WriteRune(emojis[r.IntN(len(emojis))])
			if r.IntN(3) == 0 {
				b.WriteRune(emojis[r.IntN(len(emojis))])
			}
			b.WriteByte(' ')
		case 1:
			b.WriteString(accented[r.IntN(len(accented))] + " ")
		default:
			b.WriteString(proseWords[r.IntN(len(proseWords))] + " ")
		}
		if r.IntN(15) == 0 {
			b.WriteString("\n")
		}
	}
	return b.String()
}

// kindText is size bytes (about) of the named kind, the same for every call.
func kindText(name string, size int) string {
	for _, k := range textKinds {
		if k.name == name {
			return k.gen(rand.New(rand.NewPCG(uint64(size), 42)), size)
		}
	}
	panic("no text kind " + name)
}

// BenchmarkCold counts each text kind at 16 KB and 128 KB with the fast
// counter (countText, as the weigher calls it) and with tiktoken-go's
// encoder in the same run: compare the MB/s of …/fast and …/tiktoken. The
// text does not repeat, so the counter's lookups are as cold as a real
// body's.
func BenchmarkCold(b *testing.B) {
	w := testWeigher(b)
	for _, k := range textKinds {
		for _, size := range []int{16 << 10, 128 << 10} {
			text := kindText(k.name, size)
			name := fmt.Sprintf("%s/%dKB", k.name, size>>10)
			fast, ref := w.encoders[EncodingO200k], reference(b, EncodingO200k)
			b.Run(name+"/fast", func(b *testing.B) {
				b.SetBytes(int64(len(text)))
				b.ReportAllocs()
				var n int64
				for b.Loop() {
					n = countText(fast, text)
				}
				b.ReportMetric(float64(len(text))/float64(n), "bytes/token")
			})
			b.Run(name+"/tiktoken", func(b *testing.B) {
				b.SetBytes(int64(len(text)))
				b.ReportAllocs()
				for b.Loop() {
					ref.count(text)
				}
			})
		}
	}
}

func BenchmarkChat128KB(b *testing.B) { benchmarkChat(b, 128<<10) }

// BenchmarkPieceMemo counts each text kind (16 KB) with and without the
// piece memo, one count of each per iteration, in turns, so that a busy
// machine slows both alike, and reports the median time of each and their
// ratio (memo/plain: below 1, the memo is faster).
func BenchmarkPieceMemo(b *testing.B) {
	w := testWeigher(b)
	fast := w.encoders[EncodingO200k].(*bpeCounter)
	plain := &bpeCounter{ranks: fast.ranks, o200k: fast.o200k, pairs: fast.pairs, pairBits: fast.pairBits, cross: fast.cross, noMemo: true}
	for _, k := range textKinds {
		text := kindText(k.name, 16<<10)
		b.Run(k.name, func(b *testing.B) {
			var withMemo, without []time.Duration
			for i := 0; b.Loop(); i++ {
				first, second := fast, plain // each goes first every other time: the
				if i%2 == 1 {                // second finds the rank table warmed
					first, second = plain, fast
				}
				t0 := time.Now()
				n1 := first.count(text)
				t1 := time.Now()
				n2 := second.count(text)
				t2 := time.Now()
				if n1 != n2 {
					b.Fatalf("memo and plain counts differ: %d, %d", n1, n2)
				}
				d1, d2 := t1.Sub(t0), t2.Sub(t1)
				if i%2 == 1 {
					d1, d2 = d2, d1
				}
				withMemo, without = append(withMemo, d1), append(without, d2)
			}
			slices.Sort(withMemo)
			slices.Sort(without)
			m, p := withMemo[len(withMemo)/2], without[len(without)/2]
			b.ReportMetric(float64(m.Nanoseconds()), "ns-memo")
			b.ReportMetric(float64(p.Nanoseconds()), "ns-plain")
			b.ReportMetric(float64(m)/float64(p), "memo/plain")
		})
	}
}

// TestPieceMemoMatchesPlain: counting with the piece memo, cold and warm
// (the same text again, its pieces remembered), gives the counts of the
// plain counter, for every text kind and a text of pieces that share memo
// slots.
func TestPieceMemoMatchesPlain(t *testing.T) {
	w := testWeigher(t)
	fast := w.encoders[EncodingO200k].(*bpeCounter)
	plain := &bpeCounter{ranks: fast.ranks, o200k: fast.o200k, pairs: fast.pairs, pairBits: fast.pairBits, cross: fast.cross, noMemo: true}
	var many strings.Builder // more distinct pieces than the memo has slots
	for i := range 3 * memoSlots {
		fmt.Fprintf(&many, " w%xq%d", i*2654435761, i%97)
	}
	texts := []string{many.String()}
	for _, k := range textKinds {
		texts = append(texts, kindText(k.name, 16<<10))
	}
	for i, text := range texts {
		want := plain.count(text)
		for round := range 2 {
			if got := fast.count(text); got != want {
				t.Errorf("text %d, round %d: memo counts %d tokens, plain %d", i, round, got, want)
			}
		}
	}
}

// TestPieceMemoSlotsShared: pieces that land on one memo slot, with the
// same first 8 bytes, never answer for each other.
func TestPieceMemoSlotsShared(t *testing.T) {
	w := testWeigher(t)
	fast := w.encoders[EncodingO200k].(*bpeCounter)
	plain := &bpeCounter{ranks: fast.ranks, o200k: fast.o200k, pairs: fast.pairs, pairBits: fast.pairBits, cross: fast.cross, noMemo: true}
	slotOf := func(p string) uint64 { return midHash(pack(p[:8]), pack(p[8:]), len(p)) >> (64 - 12) }
	bySlot := map[uint64][]string{}
	for _, a := range "abcdefghijklmnopqrstuvwxyz" {
		for _, b := range "abcdefghijklmnopqrstuvwxyz0123456789" {
			p := "Tokenize" + string(a) + string(b) // one piece of 10 bytes
			bySlot[slotOf(p)] = append(bySlot[slotOf(p)], p)
		}
	}
	pairs, differ := 0, 0
	for _, ps := range bySlot {
		for i := 1; i < len(ps); i++ {
			m := new(pieceMemo)
			for _, p := range []string{ps[0], ps[i], ps[0], ps[i]} {
				if got, want := fast.memoTokens(m, p, 0, len(p)), plain.pieceTokens(p); got != want {
					t.Errorf("%q after %q: %d tokens, want %d", p, ps[0], got, want)
				}
			}
			pairs++
			if plain.pieceTokens(ps[0]) != plain.pieceTokens(ps[i]) {
				differ++
			}
		}
	}
	if pairs == 0 || differ == 0 {
		t.Fatalf("%d pairs sharing a slot, %d of different counts: the test shows nothing", pairs, differ)
	}
}
