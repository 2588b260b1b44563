//go:build !race

package workload

// raceEnabled is true when the tests run with -race.
const raceEnabled = false
