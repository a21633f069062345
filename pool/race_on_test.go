//go:build race

package pool_test

// floodSteps is how many notifications a flood test has a child send:
// fewer under the race detector, which makes each ten times slower,
// still hundreds of times the bounds they test.
const floodSteps = 250_000
