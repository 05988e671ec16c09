package oldscan

// CheckNumber checks the JSON number starting at b[i] by exactly the rules
// [Check] applies to numbers (the same code; RFC 8259 §6: an optional
// minus, an integer part without leading zeros, an optional fraction and
// exponent). It returns the offset just past the longest number starting
// there, and OK; or the reason (Syntax, or Truncated when b ends inside it)
// and the offset of the offending byte. What follows the number is not
// looked at: "01" is the number 0 ending at i+1, and it is for the caller
// to find that a 1 may not follow it. An i outside b is Syntax at i. Time
// O(end-i), no allocation; it never keeps b.
func CheckNumber(b []byte, i int) (end int, r Reason) {
	if i < 0 || i >= len(b) {
		return i, Syntax
	}
	return number(b, i)
}
