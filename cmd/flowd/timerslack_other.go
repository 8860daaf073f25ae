//go:build !linux

package main

import "time"

// ensureTimerSlack: the timer slack is a Linux setting (timerslack_linux.go).
func ensureTimerSlack(time.Duration) error { return nil }
