// Package daemon wires a flowd agent: its configuration, the client
// listeners (Unix socket, TLS TCP) and their roles and limits, the method
// handlers, forwarding to the leader, the members' reports (versions for
// rolling upgrades, stats for autopilot), snapshots, metrics, health and
// logging.
//
// Handlers reach raft and the state only through the narrow interfaces in
// seam.go. See DESIGN.md beside this file.
package daemon
