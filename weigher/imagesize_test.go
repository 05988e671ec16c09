package weigher

import "testing"

// TestImageSizeBeyondTable: a generated image of a size the table lacks
// is reserved at the table's largest tokens per pixel (4,160 for
// 1024x1024 high) times its pixels, never below the table's largest
// entry (6,240); a listed size keeps its figure.
func TestImageSizeBeyondTable(t *testing.T) {
	w := testWeigher(t)
	for _, c := range []struct {
		size string
		n    int64
		want int64
	}{
		{"3840x2160", 10, 10 * ((3840*2160*4160 + 1024*1024 - 1) / (1024 * 1024))}, // 32,907 each (32,906.25 rounded up)
		{"2048X2048", 1, 4 * 4160},
		{"512x512", 2, 2 * 6240},
		{"auto", 1, 6240},
		{"1024x1024", 1, 4160},
		{"0x100", 1, 6240},
		{"99999999x2", 1, 6240},
	} {
		e := w.Weigh(KindImages, []byte(`{"model":"gpt-image-2","prompt":"a poster","size":"`+c.size+`","quality":"high","n":`+itoa(c.n)+`}`))
		if e.OutputTokens != c.want {
			t.Errorf("%s x %d: reserved %d output tokens, want %d", c.size, c.n, e.OutputTokens, c.want)
		}
	}
}

func itoa(n int64) string {
	b := []byte{}
	for ; n > 0 || len(b) == 0; n /= 10 {
		b = append([]byte{byte('0' + n%10)}, b...)
	}
	return string(b)
}
