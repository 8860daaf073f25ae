package cluster

import (
	"crypto/tls"
	"time"
)

// Status is a node's view of the cluster.
type Status struct {
	NodeID       string       `json:"node_id"`
	LeaderID     string       `json:"leader_id"`
	LeaderAddr   string       `json:"leader_address"`
	State        string       `json:"state"`
	Term         uint64       `json:"term"`
	CommitIndex  uint64       `json:"commit_index"`
	AppliedIndex uint64       `json:"applied_index"`
	LastContact  string       `json:"last_contact"`
	Peers        []PeerStatus `json:"peers"`
}

// PeerStatus is one server of the raft configuration.
type PeerStatus struct {
	ID       string `json:"id"`
	Address  string `json:"address"`
	Suffrage string `json:"suffrage"`
}

// GroupCommitStats are the group commit's running totals on this node (it
// groups only while it leads). Over an interval, Commands/Entries is the
// group size, Linger/Entries the wait for a fuller group, and
// Propose/Entries the round trip of a group entry (raft commit on a
// majority and the FSM apply here): the two parts of a closed-loop
// client's cycle that the agent controls (cluster/raftnode/DESIGN.md, "A
// busy group lingers").
type GroupCommitStats struct {
	// Entries is the entries proposed, Commands the callers' commands in
	// them (a claim riding along for waiting workers is not counted).
	Entries, Commands uint64
	// Lingers counts the waits for a fuller group; LingersFilled those the
	// queue ended before their bound.
	Lingers, LingersFilled uint64
	// Linger is the time spent in those waits; Propose the time from
	// proposing each entry to its results.
	Linger, Propose time.Duration
}

// TLSProvider is what raft's TLS stream layer (raftnode/tls.go) needs from
// the node's certificate store (internal/pki.Store satisfies it):
// configurations whose peer verification ends in check(peerNodeID). They
// must read the current certificates on every handshake, so a reload
// reaches new connections.
type TLSProvider interface {
	ServerConfig(check func(id string) error) *tls.Config
	ClientConfig(check func(id string) error) *tls.Config
}
