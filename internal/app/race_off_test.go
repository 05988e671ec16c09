//go:build !race

package app

// raceOn: the race detector is on, whose shadow memory a child process's
// resident peak would count.
const raceOn = false
