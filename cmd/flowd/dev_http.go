package main

import (
	"fmt"
	"strings"
)

// devHTTPLine is flowd dev's line naming the agents' HTTP listeners
// (--http-base-port, then one port per agent): the Prometheus metrics URL
// of each, and the health endpoints `flowd ready` asks.
func devHTTPLine(base, n int) string {
	urls := make([]string, n)
	for i := range urls {
		urls[i] = fmt.Sprintf("http://127.0.0.1:%d/metrics", base+i)
	}
	return fmt.Sprintf("  metrics  %s\n  health   /healthz and /readyz on the same ports (`flowd ready` asks n1's)", strings.Join(urls, "  "))
}
