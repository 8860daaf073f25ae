// Package e2e holds end-to-end tests that build the flowd binary and the
// example worker and drive real agent processes on loopback: submit through
// one node, claim through another, kill -9 the leader, restart nodes, feed
// the protocol bad input over a raw socket, signal worker processes.
package e2e
