//go:build unix

package raftnode

import (
	"syscall"
	"time"
)

// processCPU is the CPU time this process has used, user and system, every
// goroutine (a benchmark's three nodes run in it).
func processCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
