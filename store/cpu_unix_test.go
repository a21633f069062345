//go:build unix

package store

import (
	"syscall"
	"time"
)

// processCPU is the CPU time this process has used: the benchmarks report
// it per request, a figure a busy shared machine disturbs less than the
// elapsed time.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
