package proxy

import (
	"strconv"

	"github.com/valyala/fasthttp"

	"github.com/llmguard/llmguard/meter"
)

// maxShadowItems is the most shadow limits x-llmguard-shadow lists.
const maxShadowItems = 8

// setShadowHeaders writes x-llmguard-shadow, the shadow limits' verdicts on
// an admitted request (meter.Exchange.Shadow), in the shape of the
// RateLimit field (a structured-field list): one item per shadow limit,
// its name, r= what its bucket holds (after the take, or what it held when
// it would deny), t= seconds until it is full again, and the flag
// would-deny when it could not pay (it took nothing; the request was
// served all the same). Nothing when no shadow limit applies. At most
// maxShadowItems items: those that would deny first.
func setShadowHeaders(h *fasthttp.ResponseHeader, shadow []meter.Applied) {
	if len(shadow) == 0 {
		return
	}
	var stack [256]byte
	buf := stack[:0]
	n := 0
	for _, deny := range [2]bool{true, false} {
		for _, a := range shadow {
			if a.Denied != deny || n == maxShadowItems {
				continue
			}
			if n > 0 {
				buf = append(buf, ", "...)
			}
			n++
			buf = strconv.AppendQuote(buf, a.Rule.Name)
			buf = append(buf, ";r="...)
			buf = strconv.AppendInt(buf, max(a.Status.Remaining, 0), 10)
			buf = append(buf, ";t="...)
			buf = strconv.AppendInt(buf, ceilSeconds(a.Status.Reset), 10)
			if a.Denied {
				buf = append(buf, ";would-deny"...)
			}
		}
	}
	h.SetBytesV("x-llmguard-shadow", buf)
}
