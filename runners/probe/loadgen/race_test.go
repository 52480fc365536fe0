//go:build race

package loadgen

// raceEnabled: the race detector slows everything several times, so tests
// skip their latency bounds (their counts and kinds still hold).
const raceEnabled = true
