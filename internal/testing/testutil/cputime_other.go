//go:build !unix

package testutil

import "time"

// ProcessCPU is not measured here: benchmarks leave their CPU metric out.
func ProcessCPU() time.Duration { return 0 }
