package jsonscan

import "testing"

// checkStringAgrees reports (as a test failure) any x on which CheckString
// and Check disagree: CheckString accepts x whole (a string ending at
// len(x)) exactly when Check accepts the array [x] and x is one string
// (Skip finds its end at len(x)).
func checkStringAgrees(t *testing.T, x []byte, opt Options) {
	t.Helper()
	end, _, r := CheckString(x, 0, opt)
	one := r == OK && end == len(x)
	doc := append(append([]byte{'['}, x...), ']')
	whole := len(x) > 0 && x[0] == '"' && Skip(x, 0) == len(x) && Check(doc, Options{UTF8: opt.UTF8}) == nil
	if one != whole {
		t.Fatalf("UTF8 %v, %q: CheckString (end %d, %v) accepts %v, Check accepts %v", opt.UTF8, x, end, r, one, whole)
	}
	if r == OK && (end <= 0 || end > len(x) || x[end-1] != '"') {
		t.Fatalf("%q: end %d is not past a closing quote", x, end)
	}
}

// TestCheckString holds CheckString to Check's verdict on strings: valid
// ones, each kind of escape, control characters, cut strings and UTF-8
// (checked only with UTF8).
func TestCheckString(t *testing.T) {
	cases := []string{
		`""`, `"a"`, `"hello world"`, `"\"\\\/\b\f\n\r\t"`, `"\u00e9\uD83D\uDE00"`,
		`"\u00g0"`, `"\x"`, `"\u12"`, `"abc`, `"a\"`, `"`, ``, `a`, `"a"b`,
		"\"tab\there\"", "\"nl\nhere\"", "\"\x00\"", "\"\x1f\"", "\"\x7f\"",
		"\"caf\xc3\xa9\"", "\"caf\xe9\"", "\"\xed\xa0\x80\"", "\"\xe6\x97\"", "\"\xf0\x9f\x98\x80 long enough to pass eight\"",
		`"0123456789abcdef0123456789"`, `"0123456789abcdef\u0041\\"`,
	}
	for _, c := range cases {
		for _, u := range []bool{false, true} {
			checkStringAgrees(t, []byte(c), Options{UTF8: u})
		}
	}
	if end, esc, r := CheckString([]byte(`{"k":"v\n"}`), 5, Options{}); end != 10 || !esc || r != OK {
		t.Fatalf("inner string: end %d escaped %v %v, want 10 true ok", end, esc, r)
	}
	for _, i := range []int{-1, 0, 5, 99} {
		if _, _, r := CheckString([]byte(`{"k":1}`), i, Options{}); r != Syntax {
			t.Fatalf("offset %d not at a quote: %v, want syntax", i, r)
		}
	}
}

// FuzzCheckString is the differential fuzz test of CheckString against
// Check.
func FuzzCheckString(f *testing.F) {
	for _, s := range []string{`"a"`, `"\u00e9"`, "\"\xff\"", `"\"`, `"a\nb"`} {
		f.Add([]byte(s), false)
		f.Add([]byte(s), true)
	}
	f.Fuzz(func(t *testing.T, x []byte, u bool) {
		checkStringAgrees(t, x, Options{UTF8: u})
	})
}

// checkNumberAgrees fails when CheckNumber accepts x whole (a number ending
// at len(x)) and Check does not accept x, or the other way round.
func checkNumberAgrees(t *testing.T, x []byte) {
	t.Helper()
	end, r := CheckNumber(x, 0)
	one := r == OK && end == len(x)
	whole := len(x) > 0 && (x[0] == '-' || x[0] >= '0' && x[0] <= '9') && !isSpace(x[len(x)-1]) && Check(x, Options{}) == nil
	if one != whole {
		t.Fatalf("%q: CheckNumber (end %d, %v) accepts %v, Check accepts %v", x, end, r, one, whole)
	}
}

// TestCheckNumber holds CheckNumber to Check's verdict on numbers.
func TestCheckNumber(t *testing.T) {
	for _, c := range []string{"0", "-0", "12", "-12.5e+3", "1E9", "01", "1.", ".5", "-", "1e", "1e+", "+1", "1.5.3", "00", "", "1 ", "9007199254740993"} {
		checkNumberAgrees(t, []byte(c))
	}
	if end, r := CheckNumber([]byte(`[12,3]`), 1); end != 3 || r != OK {
		t.Fatalf("inner number: end %d %v, want 3 ok", end, r)
	}
	for _, i := range []int{-1, 6} {
		if _, r := CheckNumber([]byte(`[12,3]`), i); r != Syntax {
			t.Fatalf("offset %d outside: %v, want syntax", i, r)
		}
	}
}

// FuzzCheckNumber is the differential fuzz test of CheckNumber against
// Check.
func FuzzCheckNumber(f *testing.F) {
	for _, s := range []string{"0", "-1.5e3", "01", "1e"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, x []byte) { checkNumberAgrees(t, x) })
}
