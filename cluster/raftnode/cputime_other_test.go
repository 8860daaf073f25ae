//go:build !unix

package raftnode

import "time"

// processCPU is not measured here: cpu-ns/entry is left out.
func processCPU() time.Duration { return 0 }
