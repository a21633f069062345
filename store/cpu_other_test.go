//go:build !unix

package store

import "time"

// processCPU is not measured here.
func processCPU() time.Duration { return 0 }
