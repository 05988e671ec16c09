//go:build !race

package meter

// raceEnabled: the race detector is on; it allocates on its own account,
// so allocation budgets are not checked.
const raceEnabled = false
