package main

import (
	"fmt"
	"strings"
)

// devHTTPBasePort is flowd dev's --http-base-port default, where `flowd
// ready` asks by default.
const devHTTPBasePort = 9001

// devHTTPLine is flowd dev's line naming the agents' HTTP listeners
// (--http-base-port, then one port per agent): the Prometheus metrics URL
// of each, and the health endpoints `flowd ready` asks.
func devHTTPLine(base, n int) string {
	urls := make([]string, n)
	for i := range urls {
		urls[i] = fmt.Sprintf("http://127.0.0.1:%d/metrics", base+i)
	}
	ready := "`flowd ready` asks n1's"
	if base != devHTTPBasePort {
		ready = fmt.Sprintf("`flowd ready --http-addr 127.0.0.1:%d` asks n1's", base)
	}
	return fmt.Sprintf("  metrics  %s\n  health   /healthz and /readyz on the same ports (%s)", strings.Join(urls, "  "), ready)
}
