// Package chaos is flowd's own fault-injection suite: three (at times four)
// real `flowd agent` processes, each in a network namespace the test
// creates, a workload of submitters and workers over the agents' Unix
// sockets, a nemesis that injects faults between and into the processes,
// and checkers that run after everything is healed. It prints one summary
// line. TestChaosShort runs inside `make test`; TestChaosLong is
// `make chaos` (FLOWD_CHAOS_LONG=1). docs/chaos.md is the operator's view.
//
// # Network
//
// A bridge fdc-br0 (10.77.0.254) on the host and one namespace fdc-nX per
// node with a veth into it (10.77.0.X). Every agent binds raft and
// forwarding on its namespace address and advertises addresses of a Go TCP
// proxy (proxy.go) listening on the host end of the bridge, one proxy per
// destination node and port. So every node-to-node connection is
// nX -> proxy(nY) -> nY, and the proxy knows the pair from the source
// address. Clients do not use the network: Unix sockets are files, reachable
// from the host whatever namespace the agent runs in, so client traffic is
// never cut (faults are between nodes, as on a real cluster whose clients
// sit beside each node).
//
//   - Partitions are nftables rules in one inet table (fdchaos) on the host:
//     node A's packets to B's proxy ports, and the proxy's packets back to A,
//     are dropped (both directions for both pairs). Established connections
//     stall as on a real partition; new ones time out in SYN. The whole table
//     is rewritten in one `nft -f` transaction per change.
//   - Delay, jitter and loss are the proxy's (this kernel has no netem).
//     Delay holds each chunk; loss stalls the stream for a retransmission
//     timeout (200-800 ms) since TCP would resend the lost segment; a small
//     reset probability tears connections down. Reordering cannot happen
//     inside a TCP stream (chunks of one connection are never written out of
//     order); jitter reorders messages across connections (raft's pipeline,
//     heartbeat and pooled connections, and each forwarded call).
//   - Teardown: Cluster.Close (from t.Cleanup paths) stops every agent
//     (SIGCONT, SIGTERM, SIGKILL after 5 s), closes the proxies, deletes the
//     nft table, the namespaces and the bridge. At start, leftovers of a
//     crashed run are removed by name (prefix fdc): processes inside our
//     namespaces are killed by pid (`ip netns pids`), then namespaces, links
//     and the table go.
//
// # Agents
//
// The agents are cmd/flowd built from this tree with `go build -overlay`
// (build.go) that adds env-driven hooks to cluster.Config's defaults, without
// editing the source: a clock offset (FLOWD_CHAOS_CLOCK_OFFSET: a Go binary
// is static, so libfaketime cannot shift its clock, and time namespaces
// shift only monotonic clocks) and small raft snapshot settings (threshold
// 1024, trailing logs 512, interval 3 s) so a follower that falls behind is
// sent a snapshot within seconds. Node traffic is plaintext
// (--insecure-plaintext when the agent has the flag): the suite tests
// faults, not the TLS layer. `ip netns exec` execs the agent, so the pid we
// signal is the agent's.
//
// # Workload
//
// Submitters (paced, half pinned to one agent so their writes are forwarded,
// half with every endpoint and leader routing) submit one-task runs with a
// client-chosen UUIDv7 id (label cid) and retry with the same id until
// answered. Two queues: q1 tasks have max_attempts 1, no deliberate failure,
// and no stalling worker ever claims them: this is the "max_attempts: 1
// everywhere" variant, run side by side with the rest (a failed q1 run is an
// attempt spent by a fault). qs tasks retry (8 attempts), a quarter fail
// their first attempt on purpose, the lease is 1.5 s, and stalling workers
// claim from qs only: they never heartbeat, wait until some agent shows the
// task reaped or claimed again, then heartbeat and complete with the stale
// token; both must answer accepted:false. Workers heartbeat every lease/4
// and record every (task, token) a claim reply delivered and every accepted
// completion.
//
// # Nemesis
//
// A cycle: wait for a leader, inject, probe failover, hold the fault, heal,
// and wait until every member answers, agrees on the leader and has applied
// within 200 entries of its commit index (60 s; a node that does not is a
// gating "unrecovered"). Kinds: kill -9 of the leader and of a follower,
// SIGSTOP of the leader for 150 ms and for the hold, leader isolation (the
// leader alone: a minority), a follower alone (the leader keeps the
// majority), a bridge (leader and one follower cut, the third sees both),
// loss and delay on every link, all nodes killed at once and restarted, a
// follower down until a leader snapshot compacts its log past it (its log
// must then show "Installed remote snapshot"), a clock offset (a follower
// restarted 3 s ahead is handed the leadership for the hold, then leadership
// goes back to a node with the right clock), and a membership change under
// load (start n4 with --peers plus itself, add_peer, remove a follower,
// stop it).
//
// Failover is measured from the injection to the first write (queue.set on a
// fresh connection, 500 ms per try) that succeeds through a node of the
// majority side, per fault kind (p50/max in the summary). It includes the
// agents' own forwarding, so a forwarder stuck on a silent old leader shows.
// It also includes the injection's own latency (logged as "inject": an nft
// transaction for a partition is some tens of ms, a signal is immediate).
// Most of a leader failover is raft's: followers notice the silence at a
// random point 1-3x HeartbeatTimeout after it began, and a follower that
// still has a leader refuses pre-votes, so the election completes when the
// second follower notices; three cycles per kind give a p50 that moves by
// +-0.3 s between runs. Compare kinds with TestChaosKinds
// (FLOWD_CHAOS_KINDS, FLOWD_CHAOS_REPEAT), not one long run.
//
// # Checkers, and which gate
//
// Safety checkers fail every run (short and long): they are properties the
// cluster claims today, and a violation loses or corrupts work.
//
//   - lost: an acknowledged run (run.submit answered) missing on any member.
//   - dup_client_id: more than one run for one client id (label cid).
//   - double_success: a task with two accepted completions under different
//     tokens (from the workers' records), or two succeeded attempts in its
//     history.
//   - stale_accepted: a stale-token heartbeat or completion answered
//     accepted:true.
//   - digest_mismatch: after healing and quiescing, members at one applied
//     index report different state digests (or never reach one index).
//   - unrecovered: a member that does not rejoin (answer, follow the leader,
//     catch up) within 60 s of a heal, or that cannot list runs at the end.
//
// Liveness counters must be 0 too; they fail the long run (unless
// FLOWD_CHAOS_STRICT=0) and, with FLOWD_CHAOS_STRICT=1, the short and the
// chosen-kinds runs (CI's short run gates on safety and prints them):
//
//   - orphan_leases: an attempt whose fencing token no worker ever received
//     (a claim entry whose answer was lost, and no re-send of its request
//     id got its leases back).
//   - fault_attempts: lease_expired attempts of a non-stalling worker
//     (orphans included): attempts spent by a fault.
//   - failed_max1 / failed_retrying: failed q1 runs (should be 0: no
//     deliberate failure, one attempt) and failed qs runs.
//   - not_final: acknowledged runs not terminal 120 s after the heal.
//   - created_false: a submit answered created:false although no earlier
//     try of it was answered (the forwarder retried it).
//   - slow_forward_10s: submits that took >= 9.5 s (a forwarded write
//     waiting out its budget on a stopped or cut-off leader).
//
// An orphan lease's note lists the failed claims of its worker around it
// (when, how long, the error) and what its client logged at debug level
// then (fail-overs and re-sends inside one call, which the call's caller
// never sees as an error), which tells a lost claim answer from a lease
// nobody asked for.
//
// Everything runs against real processes, so waits poll the agents with
// deadlines; the only timed waits are a fault's hold, the fault-free gap
// between cycles and the proxy's injected delays.
package chaos
