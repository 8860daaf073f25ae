//go:build !unix

package fsm

import "time"

func processCPU() time.Duration { return 0 }
