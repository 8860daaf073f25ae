// Package cluster is the vocabulary of a flowd cluster member, without its
// implementation: the node's configuration (Config, Peer, ParsePeers, the
// defaults), raft's failure-detection timing (RaftTiming), what a node
// reports (Status, PeerStatus, MemberStats, GroupCommitStats, autopilot's
// AutopilotState), the interfaces a node is given (TLSProvider,
// MemberProber), and its errors (ErrNotLeader and *NotLeaderError,
// ErrLeadershipLost, ErrShutdown, ErrStorageFailed and *StorageFailure,
// ErrNotMember).
//
// It imports no raft: the daemon depends on it, and on interfaces of its
// own, without linking hashicorp/raft. The raft implementation is
// cluster/raftnode, which speaks this vocabulary (its errors are these
// values, so errors.Is and errors.As match across the two). See DESIGN.md
// beside this file.
package cluster
