//go:build !race

package pool_test

// floodSteps is how many notifications a flood test has a child send
// (race_on_test.go: fewer under the race detector).
const floodSteps = 1_000_000
