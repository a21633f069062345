//go:build !race

package main

// raceBuild: this test binary runs without the race detector, and so does
// the switchboard it builds.
const raceBuild = false
