package main

import (
	"runtime/debug"

	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/flowd/flowd/cluster"
	"github.com/flowd/flowd/cluster/raftnode"
	"github.com/flowd/flowd/daemon"
	"github.com/flowd/flowd/fsm/store"
)

func init() { commands = append(commands, agentCommand) }

var agentCommand = &cli.Command{
	Name:  "agent",
	Usage: "run a flowd agent (one node of the raft cluster)",
	Description: "Every option is also read from its FLOWD_* variable and from --config FILE\n" +
		"(YAML or JSON, keys are the flag names with '_' for '-'); flags and variables\n" +
		"override the file. SIGTERM or SIGINT stops gracefully (leadership is handed over);\n" +
		"a second signal exits at once. SIGHUP reloads the TLS certificates.\n\n" +
		"   flowd agent --node-id n1 --data-dir DIR --raft-addr 127.0.0.1:7001 --socket DIR/n1.sock \\\n" +
		"               --peers n1=127.0.0.1:7001,n2=127.0.0.1:7002,n3=127.0.0.1:7003",
	Flags: []cli.Flag{
		&cli.StringFlag{Name: "config", EnvVars: []string{"FLOWD_CONFIG"}, TakesFile: true, Usage: "config file (YAML or JSON)"},
		&cli.StringFlag{Name: "node-id", EnvVars: []string{"FLOWD_NODE_ID"}, Usage: "this node's id, e.g. n1 (required)"},
		&cli.StringFlag{Name: "data-dir", EnvVars: []string{"FLOWD_DATA_DIR"}, TakesFile: true, Usage: "where the raft log and state live (required)"},
		&cli.StringFlag{Name: "raft-addr", EnvVars: []string{"FLOWD_RAFT_ADDR"}, Usage: "raft bind address `HOST:PORT`", DefaultText: "127.0.0.1:7001"},
		&cli.StringFlag{Name: "raft-advertise", EnvVars: []string{"FLOWD_RAFT_ADVERTISE"}, Usage: "raft address other nodes dial, when --raft-addr binds 0.0.0.0"},
		&cli.StringFlag{Name: "peers", EnvVars: []string{"FLOWD_PEERS"}, Usage: "initial cluster `ID=HOST:PORT,...` (the same on every node)"},
		&cli.StringFlag{Name: "socket", EnvVars: []string{"FLOWD_SOCKET"}, TakesFile: true, Usage: "client Unix socket", DefaultText: "DATA_DIR/flowd.sock"},
		&cli.StringFlag{Name: "client-addr", EnvVars: []string{"FLOWD_CLIENT_ADDR"}, Usage: "optional TCP client listener `HOST:PORT` (TLS with the node's certificate; clients authenticate with ACL tokens)"},
		&cli.StringFlag{Name: "http-addr", EnvVars: []string{"FLOWD_HTTP_ADDR"}, Usage: "optional HTTP health/metrics listener `HOST:PORT`"},
		&cli.StringFlag{Name: "forward-addr", EnvVars: []string{"FLOWD_FORWARD_ADDR"}, Usage: "inter-node forwarding listener", DefaultText: "raft host, raft port + 1000"},
		&cli.StringFlag{Name: "forward-advertise", EnvVars: []string{"FLOWD_FORWARD_ADVERTISE"}, Usage: "forwarding address other nodes dial", DefaultText: "derived from --raft-advertise"},
		&cli.StringFlag{Name: "tls-ca", EnvVars: []string{"FLOWD_TLS_CA"}, TakesFile: true, Usage: "cluster CA certificate `FILE` (from 'flowd tls ca create'); with --tls-cert and --tls-key, raft and forwarding use mutual TLS"},
		&cli.StringFlag{Name: "tls-cert", EnvVars: []string{"FLOWD_TLS_CERT"}, TakesFile: true, Usage: "this node's certificate `FILE` (from 'flowd tls cert create --node ID')"},
		&cli.StringFlag{Name: "tls-key", EnvVars: []string{"FLOWD_TLS_KEY"}, TakesFile: true, Usage: "this node's private key `FILE`"},
		&cli.BoolFlag{Name: "insecure-plaintext", EnvVars: []string{"FLOWD_INSECURE_PLAINTEXT"}, Usage: "allow plaintext, unauthenticated node traffic on addresses that are not loopback (anyone who reaches the ports controls the cluster)"},
		&cli.IntFlag{Name: "max-line", EnvVars: []string{"FLOWD_MAX_LINE"}, Usage: "longest request line in bytes", DefaultText: "4194304 (4 MiB)"},
		&cli.StringFlag{Name: "allow-admin-uids", EnvVars: []string{"FLOWD_ALLOW_ADMIN_UIDS"}, Usage: "socket callers (uids or user names, comma-separated) with the admin role (every method); uid 0 and the agent's uid always have it"},
		&cli.StringFlag{Name: "allow-admin-gids", EnvVars: []string{"FLOWD_ALLOW_ADMIN_GIDS"}, Usage: "groups (gids or names) whose members have the admin role", DefaultText: "the agent's group"},
		&cli.StringFlag{Name: "allow-worker-uids", EnvVars: []string{"FLOWD_ALLOW_WORKER_UIDS"}, Usage: "socket callers with the worker role (agent.hello, task.claim/heartbeat/complete/fail)"},
		&cli.StringFlag{Name: "allow-worker-gids", EnvVars: []string{"FLOWD_ALLOW_WORKER_GIDS"}, Usage: "groups whose members have the worker role"},
		&cli.StringFlag{Name: "allow-read-uids", EnvVars: []string{"FLOWD_ALLOW_READ_UIDS"}, Usage: "socket callers with the read role (gets, lists, waits, events, status)"},
		&cli.StringFlag{Name: "allow-read-gids", EnvVars: []string{"FLOWD_ALLOW_READ_GIDS"}, Usage: "groups whose members have the read role"},
		&cli.StringFlag{Name: "client-role", EnvVars: []string{"FLOWD_CLIENT_ROLE"}, Usage: "roles of a --client-addr connection that gives no ACL token (agent.auth; tokens come from flowd acl token create): none, admin, worker, read, comma-separated", DefaultText: "none"},
		&cli.IntFlag{Name: "max-conns", EnvVars: []string{"FLOWD_MAX_CONNS"}, Usage: "connections per client listener (-1: no limit)", DefaultText: "1024"},
		&cli.IntFlag{Name: "max-conns-per-uid", EnvVars: []string{"FLOWD_MAX_CONNS_PER_UID"}, Usage: "socket connections per caller uid (-1: no limit)", DefaultText: "256"},
		&cli.DurationFlag{Name: "line-timeout", EnvVars: []string{"FLOWD_LINE_TIMEOUT"}, Usage: "a request line must arrive whole within this once begun (-1s: no limit)", DefaultText: "30s"},
		&cli.DurationFlag{Name: "idle-timeout", EnvVars: []string{"FLOWD_IDLE_TIMEOUT"}, Usage: "close a client connection silent this long with no call or stream open (-1s: never)", DefaultText: "10m"},
		&cli.Int64Flag{Name: "max-partial-bytes", EnvVars: []string{"FLOWD_MAX_PARTIAL_BYTES"}, Usage: "bytes of unfinished request lines held for all connections together (-1: no limit)", DefaultText: "33554432 (32 MiB)"},
		&cli.IntFlag{Name: "max-subscriptions", EnvVars: []string{"FLOWD_MAX_SUBSCRIPTIONS"}, Usage: "event streams per connection", DefaultText: "32"},
		&cli.BoolFlag{Name: "pprof", EnvVars: []string{"FLOWD_PPROF"}, Usage: "serve /debug/pprof on --http-addr (off: it exposes memory contents and costs CPU)"},
		&cli.StringFlag{Name: "snapshot-dir", EnvVars: []string{"FLOWD_SNAPSHOT_DIR"}, TakesFile: true, Usage: "the only directory snapshot.save writes and snapshot.restore reads", DefaultText: "DATA_DIR/snapshots"},
		&cli.DurationFlag{Name: "snapshot-interval", EnvVars: []string{"FLOWD_SNAPSHOT_INTERVAL"}, Usage: "take a snapshot of this agent's state into --snapshot-dir this often (at least 1s; names flowd-TIME-NODE.snap; 0: never)", DefaultText: "0 (off)"},
		&cli.IntFlag{Name: "snapshot-retain", EnvVars: []string{"FLOWD_SNAPSHOT_RETAIN"}, Usage: "scheduled snapshots to keep (the oldest of this agent's scheduled files are removed; other files never)", DefaultText: "24"},
		&cli.StringFlag{Name: "log-level", EnvVars: []string{"FLOWD_LOG_LEVEL"}, Usage: "debug, info, warn or error", DefaultText: "info"},
		&cli.StringFlag{Name: "log-format", EnvVars: []string{"FLOWD_LOG_FORMAT"}, Usage: "text or json", DefaultText: "text"},
		&cli.Float64Flag{Name: "raft-multiplier", EnvVars: []string{"FLOWD_RAFT_MULTIPLIER"}, Usage: "scales raft's timeouts (heartbeat and election 500ms, leader lease = heartbeat) as Consul's raft_multiplier: higher rides out longer stalls of a busy machine, lower replaces a crashed leader sooner (0.1 to 10); an explicit --raft-*-timeout wins", DefaultText: fmt.Sprint(cluster.DefaultRaftMultiplier)},
		&cli.DurationFlag{Name: "raft-heartbeat-timeout", EnvVars: []string{"FLOWD_RAFT_HEARTBEAT_TIMEOUT"}, Usage: "raft heartbeat timeout (failure detection; a crashed leader is replaced after about 2-3x this)", DefaultText: "500ms x --raft-multiplier"},
		&cli.DurationFlag{Name: "raft-election-timeout", EnvVars: []string{"FLOWD_RAFT_ELECTION_TIMEOUT"}, Usage: "raft election timeout (a candidate without a majority tries again after 1-2x this)", DefaultText: "500ms x --raft-multiplier"},
		&cli.DurationFlag{Name: "raft-leader-lease-timeout", EnvVars: []string{"FLOWD_RAFT_LEADER_LEASE_TIMEOUT"}, Usage: "the leader steps down after hearing from no majority for this long (at most the heartbeat timeout)", DefaultText: "the heartbeat timeout"},
		&cli.IntFlag{Name: "raft-log-cache-bytes", EnvVars: []string{"FLOWD_RAFT_LOG_CACHE_BYTES"}, Usage: "memory for the cache of recent raft log entries (an entry that does not fit is read from the log file)", DefaultText: "67108864 (64 MiB)"},
		&cli.StringFlag{Name: "raft-log-store", EnvVars: []string{"FLOWD_RAFT_LOG_STORE"}, Usage: "the raft log store of a new data dir: wal (raft-wal segment files, one fsync per append) or bolt (raft-boltdb); an existing data dir keeps the store it was created with (docs/operations.md, \"Raft log store\")", DefaultText: cluster.DefaultLogStore},
		&cli.Int64Flag{Name: "state-cache-bytes", EnvVars: []string{"FLOWD_STATE_CACHE_BYTES"}, Usage: "the state store's block cache (badger); the state store also holds two 64 MiB memtables and a 16 MiB index cache", DefaultText: "33554432 (32 MiB)"},
		&cli.DurationFlag{Name: "state-write-window", EnvVars: []string{"FLOWD_STATE_WRITE_WINDOW"}, Value: store.DefaultWriteBehindAge, Usage: "how long applied entries wait in memory before the state store writes them out as one transaction (a record written again within the window is written once; a crash loses nothing, the raft log replays the window); 0 writes every entry at once"},
		&cli.IntFlag{Name: "follower-apply-nice", EnvVars: []string{"FLOWD_FOLLOWER_APPLY_NICE"}, Value: raftnode.DefaultFollowerApplyNice, Usage: "Linux: while following, apply committed entries on a thread whose nice value is this much above the agent's (0-19), so the commit path (appends, acknowledgements, the leader's work) gets a shared core first; needs the right to set it back on leading (root, CAP_SYS_NICE or RLIMIT_NICE 20, e.g. systemd LimitNICE=+0), otherwise followers apply at the agent's priority; 0 applies at the agent's priority"},
		&cli.DurationFlag{Name: "raft-commit-timeout", EnvVars: []string{"FLOWD_RAFT_COMMIT_TIMEOUT"}, Usage: "how long the leader waits, with nothing new to replicate, before telling followers the commit index anyway (lower: followers apply sooner once traffic stops; higher: less idle CPU; at most 500ms)", DefaultText: "100ms"},
		&cli.Int64Flag{Name: "memory-limit", EnvVars: []string{"FLOWD_MEMORY_LIMIT"}, Usage: "soft limit of the agent's Go memory in bytes (as GOMEMLIMIT; GOMEMLIMIT, if set, wins): near it the GC runs more often instead of letting the heap grow (0 = none)"},
		&cli.DurationFlag{Name: "timer-slack", EnvVars: []string{"FLOWD_TIMER_SLACK"}, Value: time.Millisecond, Usage: "Linux timer slack of the agent's threads (how late a timed sleep may wake, so that close wake-ups merge: less CPU in context switches); set by re-executing the agent once at start, unless it already runs with it (systemd: TimerSlackNSec=); 0 keeps the inherited slack"},
		&cli.IntFlag{Name: "gc-percent", EnvVars: []string{"FLOWD_GC_PERCENT"}, Value: 50, Usage: "Go GC target (as GOGC; GOGC, if set, wins): the heap may grow to (1 + N/100) times what is live; higher collects less often but touches more fresh memory (each page of it a page fault) and holds more"},
		&cli.DurationFlag{Name: "idle-type-after", EnvVars: []string{"FLOWD_IDLE_TYPE_AFTER"}, Usage: "flag a run (run get: waiting for worker) when a ready task's type has had no worker claiming it in its queue for this long", DefaultText: "30s"},
		&cli.BoolFlag{Name: "autopilot-cleanup-dead-servers", EnvVars: []string{"FLOWD_AUTOPILOT_CLEANUP_DEAD_SERVERS"}, Value: true, Usage: "the leader removes a voter that has not answered for --autopilot-dead-server-after, never leaving fewer than --autopilot-min-quorum voters (so a dead node is removed once its replacement joins)"},
		&cli.IntFlag{Name: "autopilot-min-quorum", EnvVars: []string{"FLOWD_AUTOPILOT_MIN_QUORUM"}, Usage: "the fewest voters dead-server cleanup leaves", DefaultText: "the number of --peers"},
		&cli.DurationFlag{Name: "autopilot-last-contact-threshold", EnvVars: []string{"FLOWD_AUTOPILOT_LAST_CONTACT_THRESHOLD"}, Usage: "a server that has not heard from the leader for longer is unhealthy", DefaultText: "4 x --raft-heartbeat-timeout, at least 1s"},
		&cli.DurationFlag{Name: "autopilot-server-stabilization-time", EnvVars: []string{"FLOWD_AUTOPILOT_SERVER_STABILIZATION_TIME"}, Usage: "how long a server must be healthy to count as stable", DefaultText: "10s"},
		&cli.DurationFlag{Name: "autopilot-dead-server-after", EnvVars: []string{"FLOWD_AUTOPILOT_DEAD_SERVER_AFTER"}, Usage: "a server that has not answered the leader's probe for this long is dead", DefaultText: "30s"},
		&cli.DurationFlag{Name: "upgrade-auto-finalize", EnvVars: []string{"FLOWD_UPGRADE_AUTO_FINALIZE"}, Usage: "the leader raises the cluster's state-machine version once every voter's release has applied a newer one for this long (docs/operations.md, \"Rolling upgrades\"); negative: never, finalize by hand with `flowd operator upgrade finalize`", DefaultText: "10m"},
		&cli.DurationFlag{Name: "shutdown-timeout", EnvVars: []string{"FLOWD_SHUTDOWN_TIMEOUT"}, Usage: "bound on a graceful stop (drain clients, hand over leadership)", DefaultText: "10s"},
	},
	Action: agentAction,
	// The client options (--addr, --output, ...) do not apply to the agent.
	CustomHelpTemplate: cli.CommandHelpTemplate,
}

// agentConfig merges --config FILE with the flags and variables (which win)
// and normalizes the result; every error is a usage error (exit 2).
func agentConfig(cCtx *cli.Context) (daemon.Config, error) {
	if cCtx.NArg() > 0 {
		return daemon.Config{}, usageErr(cCtx, "unexpected arguments %q: the agent takes only flags", cCtx.Args().Slice())
	}
	var base daemon.Config
	if path := cCtx.String("config"); path != "" {
		c, err := daemon.LoadConfigFile(path)
		if err != nil {
			return daemon.Config{}, &cliError{code: exitUsage, msg: err.Error()}
		}
		base = c
	}
	over := daemon.Config{
		NodeID: cCtx.String("node-id"), DataDir: cCtx.String("data-dir"), RaftAddr: cCtx.String("raft-addr"),
		RaftAdvertise: cCtx.String("raft-advertise"), Peers: cCtx.String("peers"), Socket: cCtx.String("socket"),
		ClientAddr: cCtx.String("client-addr"), HTTPAddr: cCtx.String("http-addr"),
		ForwardAddr: cCtx.String("forward-addr"), ForwardAdvertise: cCtx.String("forward-advertise"),
		MaxLine: cCtx.Int("max-line"), LogLevel: cCtx.String("log-level"), LogFormat: cCtx.String("log-format"),
		RaftMultiplier:   cCtx.Float64("raft-multiplier"),
		HeartbeatTimeout: cCtx.Duration("raft-heartbeat-timeout"), ElectionTimeout: cCtx.Duration("raft-election-timeout"),
		LeaderLeaseTimeout: cCtx.Duration("raft-leader-lease-timeout"),
		CommitTimeout:      cCtx.Duration("raft-commit-timeout"),
		RaftLogCacheBytes:  cCtx.Int("raft-log-cache-bytes"), StateCacheBytes: cCtx.Int64("state-cache-bytes"),
		RaftLogStore:    cCtx.String("raft-log-store"),
		ShutdownTimeout: cCtx.Duration("shutdown-timeout"), IdleTypeAfter: cCtx.Duration("idle-type-after"), Version: version,
		UpgradeAutoFinalize: cCtx.Duration("upgrade-auto-finalize"),
		AutopilotMinQuorum:  cCtx.Int("autopilot-min-quorum"), AutopilotLastContactThreshold: cCtx.Duration("autopilot-last-contact-threshold"),
		AutopilotServerStabilizationTime: cCtx.Duration("autopilot-server-stabilization-time"),
		AutopilotDeadServerAfter:         cCtx.Duration("autopilot-dead-server-after"),
		TLSCA:                            cCtx.String("tls-ca"), TLSCert: cCtx.String("tls-cert"), TLSKey: cCtx.String("tls-key"),
		InsecurePlaintext: cCtx.Bool("insecure-plaintext"),
		AllowAdminUIDs:    cCtx.String("allow-admin-uids"), AllowAdminGIDs: cCtx.String("allow-admin-gids"),
		AllowWorkerUIDs: cCtx.String("allow-worker-uids"), AllowWorkerGIDs: cCtx.String("allow-worker-gids"),
		AllowReadUIDs: cCtx.String("allow-read-uids"), AllowReadGIDs: cCtx.String("allow-read-gids"),
		ClientRole: cCtx.String("client-role"),
		MaxConns:   cCtx.Int("max-conns"), MaxConnsPerUID: cCtx.Int("max-conns-per-uid"),
		LineTimeout: cCtx.Duration("line-timeout"), IdleTimeout: cCtx.Duration("idle-timeout"),
		MaxPartialBytes: cCtx.Int64("max-partial-bytes"), MaxSubscriptions: cCtx.Int("max-subscriptions"),
		Pprof: cCtx.Bool("pprof"), SnapshotDir: cCtx.String("snapshot-dir"),
		SnapshotInterval: cCtx.Duration("snapshot-interval"), SnapshotRetain: cCtx.Int("snapshot-retain"),
	}
	if cCtx.IsSet("state-write-window") { // unset: the file's, or the default
		d := cCtx.Duration("state-write-window")
		over.StateWriteWindow = &d
	}
	if cCtx.IsSet("follower-apply-nice") { // unset: the file's, or the default
		v := cCtx.Int("follower-apply-nice")
		over.FollowerApplyNice = &v
	}
	if cCtx.IsSet("autopilot-cleanup-dead-servers") {
		v := cCtx.Bool("autopilot-cleanup-dead-servers")
		over.AutopilotCleanupDeadServers = &v
	}
	cfg := base.Merge(over)
	if f := strings.ToLower(cfg.LogFormat); f != "" && f != "text" && f != "json" {
		return cfg, &cliError{code: exitUsage, msg: fmt.Sprintf("invalid agent configuration:\n  - --log-format %q must be text or json", cfg.LogFormat)}
	}
	if err := cfg.Normalize(); err != nil {
		return cfg, &cliError{code: exitUsage, msg: err.Error(), hint: "see `flowd agent --help`"}
	}
	if err := cfg.CheckTransportSecurity(); err != nil {
		return cfg, &cliError{code: exitUsage, msg: err.Error(), hint: "see `flowd tls --help` and docs/operations.md, \"Security\""}
	}
	return cfg, nil
}

func agentAction(cCtx *cli.Context) error {
	cfg, err := agentConfig(cCtx)
	if err != nil {
		return err
	}
	log := agentLogger(cCtx.App.ErrWriter, cfg.LogLevel, cfg.LogFormat)
	// Before anything is opened: on success this does not return.
	if err := ensureTimerSlack(cCtx.Duration("timer-slack")); err != nil {
		log.Warn("running with the inherited timer slack", "want", cCtx.Duration("timer-slack"), "err", err)
	}
	if _, set := os.LookupEnv("GOGC"); !set && cCtx.Int("gc-percent") != 0 {
		// Most of the agent's live heap is pointer-free (badger's memtable
		// arenas, ~80 MiB each, and the caches' byte slices), which a
		// collection marks without scanning, so collecting at 1.5x the live
		// heap costs little; growing the heap to 2x or 3x of it costs a
		// page fault per fresh 4 KiB page, and the agent's memory
		// (docs/performance.md, "GC target and fresh pages").
		debug.SetGCPercent(cCtx.Int("gc-percent"))
	}
	if _, set := os.LookupEnv("GOMEMLIMIT"); !set && cCtx.Int64("memory-limit") > 0 {
		// The heap may grow to (1 + gc-percent/100) times what is live;
		// a soft limit bounds that (the runtime caps the GC's CPU
		// near it, so it cannot thrash).
		debug.SetMemoryLimit(cCtx.Int64("memory-limit"))
	}
	// SIGHUP reloads certificates; caught from here on, so one sent
	// during start-up does not kill the agent.
	hups := make(chan os.Signal, 1)
	signal.Notify(hups, syscall.SIGHUP)
	defer signal.Stop(hups)
	cfg.OpenNode = daemon.NodeOpener(raftnode.Open) // the raft node (cluster/raftnode)
	a, err := daemon.New(cfg, log)
	if err != nil && daemon.IsVersionRefusal(err) {
		return &cliError{code: daemon.ExitVersion, msg: fmt.Sprintf("agent %s refuses to start: %v", cfg.NodeID, err),
			hint: "see docs/operations.md, \"Rolling upgrades\""}
	}
	if err != nil && daemon.IsStorageFailure(err) {
		return &cliError{code: daemon.ExitStorage, msg: fmt.Sprintf("agent %s refuses to start: %v", cfg.NodeID, err),
			hint: "the data dir's storage is damaged or full; see docs/operations.md, \"Storage failures\""}
	}
	if err != nil {
		return failf("another agent may hold the socket or ports, or --data-dir may belong to another node", "start agent %s: %v", cfg.NodeID, err)
	}
	ctx, cancel := context.WithCancel(cCtx.Context)
	defer cancel()
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	done := make(chan struct{})
	defer func() {
		signal.Stop(sigs)
		close(done)
	}()
	go func() {
		for {
			select {
			case <-hups:
				if err := a.ReloadTLS(); err != nil {
					log.Error("SIGHUP: "+err.Error(), "hint", "fix the files and send SIGHUP again")
				}
			case <-done:
				return
			}
		}
	}()
	go func() {
		select {
		case s := <-sigs:
			log.Info("signal received; stopping gracefully (send it again to exit at once)", "signal", s.String())
			cancel()
		case <-done:
			return
		}
		select {
		case s := <-sigs:
			log.Warn("second signal; exiting now", "signal", s.String())
			os.Exit(1)
		case <-done:
		}
	}()
	if err := a.Run(ctx); err != nil {
		if daemon.IsVersionRefusal(err) {
			return &cliError{code: daemon.ExitVersion, msg: fmt.Sprintf("agent %s stopped: %v", cfg.NodeID, err),
				hint: "see docs/operations.md, \"Rolling upgrades\""}
		}
		if daemon.IsStorageFailure(err) {
			return &cliError{code: daemon.ExitStorage, msg: fmt.Sprintf("agent %s stopped: %v", cfg.NodeID, err),
				hint: "see docs/operations.md, \"Storage failures\""}
		}
		return failf("", "agent %s: %v", cfg.NodeID, err)
	}
	return nil
}

// agentLogger is daemon.NewLogger writing to w (the app's stderr) instead
// of os.Stderr. The level was checked by Config.Normalize.
func agentLogger(w io.Writer, level, format string) *slog.Logger {
	lv := slog.LevelInfo
	switch strings.ToLower(level) {
	case "debug":
		lv = slog.LevelDebug
	case "warn", "warning":
		lv = slog.LevelWarn
	case "error":
		lv = slog.LevelError
	}
	opts := &slog.HandlerOptions{Level: lv}
	if strings.ToLower(format) == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}
