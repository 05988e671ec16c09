package proxy

// internPath is internPathAt's string and whether b spells one of
// knownPaths (known), for the tests that read it so.
func internPath(b []byte) (s string, known bool) {
	s, i := internPathAt(b)
	return s, i >= 0
}
