//go:build race

package workload

// raceEnabled is true when the tests run with -race: the slowest sample-wide checks then take a
// sparser subset (the race detector makes each zlib writer of cells' encoder costly).
const raceEnabled = true
