package jsonscan

// CheckString checks the JSON string whose opening quote is at b[i] by
// exactly the rules [Check] applies to every string it scans (the same
// code): escapes (\" \\ \/ \b \f \n \r \t and \u with four hex digits), no
// control character (< 0x20) raw, and with opt.UTF8 valid UTF-8 (RFC 3629);
// only opt.UTF8 is read. It returns the offset just past the closing quote,
// whether the string holds an escape, and OK; or, when the string is not
// valid, the reason as the scan finds it (Syntax, NotUTF8, or Truncated
// when b ends inside it: end is then len(b); Check may refine a Syntax
// error to NotUTF8 with opt.UTF8, see [Options.UTF8]) and the offset of the
// offending byte. CheckString accepts a string exactly when Check accepts
// it. An i that is not the offset of a quote in b is Syntax at i.
//
// A document that passed Check keeps passing, with the same nesting and
// keys, when a string value (not a key) of it is replaced by another that
// CheckString accepts: the weigher's stream reader relies on that to take a
// chunk shaped like the previous one without checking it whole. Time
// O(end-i), no allocation; it never keeps b.
func CheckString(b []byte, i int, opt Options) (end int, escaped bool, r Reason) {
	if i < 0 || i >= len(b) || b[i] != '"' {
		return i, false, Syntax
	}
	s := scanner{b: b, utf8: opt.UTF8, stop: &str}
	if opt.UTF8 {
		// As check sets them: escRun stops at a byte ≥ 0x80 by the
		// table for the last bytes, by high for whole words.
		s.stop, s.high = &strUTF8, 0x8080808080808080
	}
	return s.str(i)
}
