// Package raftnode runs one flowd node: a hashicorp/raft member over
// raft-boltdb (the log) and the fsm package's badger store (the state),
// with its transport (plaintext on loopback or mutual TLS), bootstrap and
// membership, quorum-loss recovery (recover.go), raft timing for busy
// machines (cluster.RaftTiming, applied in Config.defaults), the leader's loops (reaper, retry tick, dispatcher,
// schedules, GC, digest check, autopilot) and proposals, grouped or alone.
//
// A node whose local storage fails, or whose binary cannot apply the
// cluster's state-machine version, stops instead of diverging (storage.go).
// The library never exits the process. The vocabulary it speaks (its
// configuration, status, errors, autopilot's types) is package cluster, which
// does not import raft; the daemon depends on that and on its own interfaces
// only, and is handed a *Node by the composition root (Open). See DESIGN.md
// beside this file.
package raftnode
