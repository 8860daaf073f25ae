//go:build unix

package testutil

import (
	"syscall"
	"time"
)

// ProcessCPU is the CPU time the process has used (user + system, every
// goroutine): on a shared machine a benchmark's wall time also counts the
// time it waited for a core, and a benchmark of several in-process nodes
// counts them all.
func ProcessCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
