package policy

// Candidates is the number of rule positions the index gives Match to
// check for one model name (duplicates included, before the rules' own
// Matches), without the memo: what a Match computed costs, in rules.
func (p *Policy) Candidates(pr Principal, model, reqPath string) int {
	return len(p.idx.candidates(nil, pr, model, reqPath))
}
