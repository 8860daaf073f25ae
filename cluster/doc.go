// Package cluster runs one flowd node: a hashicorp/raft member over
// raft-boltdb (the log) and the fsm package's badger store (the state),
// with its transport (plaintext on loopback or mutual TLS), bootstrap and
// membership, quorum-loss recovery (recover.go), raft timing for busy
// machines (timing.go), the leader's loops (reaper, retry tick, dispatcher,
// schedules, GC, digest check, autopilot) and proposals, grouped or alone.
//
// A node whose local storage fails, or whose binary cannot apply the
// cluster's state-machine version, stops instead of diverging (storage.go).
// The library never exits the process. See DESIGN.md beside this file.
package cluster
