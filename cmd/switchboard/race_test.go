//go:build race

package main

// raceBuild: this test binary runs under the race detector, so the
// switchboard it builds does too.
const raceBuild = true
