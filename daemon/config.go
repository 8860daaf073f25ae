package daemon

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/flowd/flowd/cluster"
)

// Config configures one agent. Every field but OpenNode has a flag and a
// FLOWD_* env var (see cmd/flowd) and a key of the same name in the config
// file.
type Config struct {
	// OpenNode opens the cluster node (raft, badger) once the listeners
	// are bound: no setting but the caller's choice of implementation,
	// daemon.NodeOpener(raftnode.Open) in cmd/flowd and the tests.
	OpenNode OpenNodeFunc `json:"-"`

	NodeID        string `json:"node_id"`
	DataDir       string `json:"data_dir"`
	RaftAddr      string `json:"raft_addr"`
	RaftAdvertise string `json:"raft_advertise,omitempty"`
	Peers         string `json:"peers,omitempty"`
	Socket        string `json:"socket,omitempty"`
	ClientAddr    string `json:"client_addr,omitempty"`
	HTTPAddr      string `json:"http_addr,omitempty"`
	// ForwardAddr is the inter-node listener followers forward writes to.
	// Default: the raft host with the raft port + 1000 (7001 -> 8001).
	ForwardAddr      string `json:"forward_addr,omitempty"`
	ForwardAdvertise string `json:"forward_advertise,omitempty"`
	// TLSCA, TLSCert and TLSKey turn on mutual TLS between nodes (raft and
	// the forwarding port; tls.go): the cluster CA and this node's
	// certificate and key, from `flowd tls`.
	TLSCA   string `json:"tls_ca,omitempty"`
	TLSCert string `json:"tls_cert,omitempty"`
	TLSKey  string `json:"tls_key,omitempty"`
	// InsecurePlaintext allows plaintext node traffic on addresses that are
	// not loopback (CheckTransportSecurity).
	InsecurePlaintext bool `json:"insecure_plaintext,omitempty"`
	// Allow* are the Unix socket's per-role allow-lists (roles.go): uids
	// or user names, gids or group names, comma-separated. uid 0 and the
	// agent's uid are always admin; AllowAdminGIDs defaults to the agent's
	// group.
	AllowAdminUIDs  string `json:"allow_admin_uids,omitempty"`
	AllowAdminGIDs  string `json:"allow_admin_gids,omitempty"`
	AllowWorkerUIDs string `json:"allow_worker_uids,omitempty"`
	AllowWorkerGIDs string `json:"allow_worker_gids,omitempty"`
	AllowReadUIDs   string `json:"allow_read_uids,omitempty"`
	AllowReadGIDs   string `json:"allow_read_gids,omitempty"`
	// ClientRole is the roles of a TCP client listener connection that
	// does not authenticate with a token (acl.go; default none).
	ClientRole string `json:"client_role,omitempty"`
	// Limits of the client listeners (rpc.Options; 0: the default,
	// negative: none).
	MaxConns         int           `json:"max_conns,omitempty"`
	MaxConnsPerUID   int           `json:"max_conns_per_uid,omitempty"`
	LineTimeout      time.Duration `json:"line_timeout,omitempty"`
	IdleTimeout      time.Duration `json:"idle_timeout,omitempty"`
	MaxPartialBytes  int64         `json:"max_partial_bytes,omitempty"`
	MaxSubscriptions int           `json:"max_subscriptions,omitempty"`
	// Pprof serves /debug/pprof on the HTTP listener.
	Pprof bool `json:"pprof,omitempty"`
	// SnapshotDir is the only directory snapshot.save writes and
	// snapshot.restore reads (default DATA_DIR/snapshots).
	SnapshotDir string `json:"snapshot_dir,omitempty"`
	// SnapshotInterval takes a snapshot into SnapshotDir this often (0:
	// never); SnapshotRetain keeps that many of them (default
	// DefaultSnapshotRetain). snapshot_schedule.go.
	SnapshotInterval time.Duration `json:"snapshot_interval,omitempty"`
	SnapshotRetain   int           `json:"snapshot_retain,omitempty"`
	MaxLine          int           `json:"max_line,omitempty"`
	LogLevel         string        `json:"log_level,omitempty"`
	LogFormat        string        `json:"log_format,omitempty"`
	// RaftMultiplier scales raft's base timeouts (heartbeat and election
	// 500 ms, leader lease = heartbeat) as Consul's raft_multiplier does;
	// an explicit timeout below overrides its scaled value. Zero:
	// cluster.DefaultRaftMultiplier. See cluster/raftnode/DESIGN.md, "Timing on a
	// busy machine".
	RaftMultiplier     float64       `json:"raft_multiplier,omitempty"`
	HeartbeatTimeout   time.Duration `json:"raft_heartbeat_timeout,omitempty"`
	ElectionTimeout    time.Duration `json:"raft_election_timeout,omitempty"`
	LeaderLeaseTimeout time.Duration `json:"raft_leader_lease_timeout,omitempty"`
	// CommitTimeout is how long the leader's replication to a follower
	// waits with nothing new to send before it sends an AppendEntries
	// anyway, so the follower learns the commit index once traffic stops
	// (see cluster/raftnode/DESIGN.md, "Idle cost"). Zero: cluster.DefaultCommitTimeout.
	CommitTimeout time.Duration `json:"raft_commit_timeout,omitempty"`
	// RaftLogCacheBytes bounds the cache of recent raft log entries; zero:
	// cluster.DefaultLogCacheBytes (64 MiB).
	RaftLogCacheBytes int `json:"raft_log_cache_bytes,omitempty"`
	// RaftLogStore is the raft log store of a new data dir, "wal" or
	// "bolt" (""/zero: cluster.DefaultLogStore); an existing data dir keeps
	// its own (cluster/raftnode/logstore.go).
	RaftLogStore string `json:"raft_log_store,omitempty"`
	// StateCacheBytes is the state store's block cache; zero: 32 MiB.
	StateCacheBytes int64 `json:"state_cache_bytes,omitempty"`
	// StateWriteWindow is how long applied commits wait in memory before
	// the state store writes them out together (nil: 100 ms; 0: every
	// commit at once).
	StateWriteWindow *time.Duration `json:"state_write_window,omitempty"`
	// FollowerApplyNice is how much a follower's apply thread's Linux nice
	// value is raised above the agent's, 0-19 (nil: 10; 0: not at all).
	FollowerApplyNice *int `json:"follower_apply_nice,omitempty"`
	// ShutdownTimeout bounds a graceful stop (drain clients, hand over
	// leadership).
	ShutdownTimeout time.Duration `json:"shutdown_timeout,omitempty"`
	// IdleTypeAfter: a ready task whose type no worker has claimed (in its
	// queue) for this long flags its run (run.get waiting_for_worker).
	// Default 30s.
	IdleTypeAfter time.Duration `json:"idle_type_after,omitempty"`
	// UpgradeAutoFinalize: the leader raises the cluster's state-machine
	// version once every voter has applied a newer one for this long
	// (upgrade.go). Zero: DefaultUpgradeAutoFinalize; negative: never
	// (only `flowd operator upgrade finalize`).
	UpgradeAutoFinalize time.Duration `json:"upgrade_auto_finalize,omitempty"`
	// Autopilot (autopilot.go, cluster/raftnode/autopilot.go): dead-server cleanup
	// (nil: on), the fewest voters cleanup leaves (0: the size of --peers),
	// and the health thresholds (0: cluster's defaults).
	AutopilotCleanupDeadServers      *bool         `json:"autopilot_cleanup_dead_servers,omitempty"`
	AutopilotMinQuorum               int           `json:"autopilot_min_quorum,omitempty"`
	AutopilotLastContactThreshold    time.Duration `json:"autopilot_last_contact_threshold,omitempty"`
	AutopilotServerStabilizationTime time.Duration `json:"autopilot_server_stabilization_time,omitempty"`
	AutopilotDeadServerAfter         time.Duration `json:"autopilot_dead_server_after,omitempty"`
	Version                          string        `json:"-"`
}

// AutopilotCleanup reports whether autopilot removes dead servers
// (default: yes, within AutopilotMinQuorum).
func (c *Config) AutopilotCleanup() bool {
	return c.AutopilotCleanupDeadServers == nil || *c.AutopilotCleanupDeadServers
}

// stateWriteWindow is StateWriteWindow as cluster.Config takes it (0: the
// default; negative: every commit at once).
func (c *Config) stateWriteWindow() time.Duration { return forCluster(c.StateWriteWindow) }

// followerApplyNice is FollowerApplyNice as cluster.Config takes it (0:
// the default; negative: not lowered).
func (c *Config) followerApplyNice() int { return forCluster(c.FollowerApplyNice) }

// forCluster maps a setting whose written 0 means "off" (nil: unset) to
// cluster.Config's convention for it: 0 the default, negative off.
func forCluster[T int | time.Duration](written *T) T {
	switch {
	case written == nil:
		return 0
	case *written == 0:
		return -1
	}
	return *written
}

// DefaultUpgradeAutoFinalize is --upgrade-auto-finalize when unset: long
// enough to roll a release back after the last agent was upgraded.
const DefaultUpgradeAutoFinalize = 10 * time.Minute

// DefaultIdleTypeAfter is --idle-type-after when unset.
const DefaultIdleTypeAfter = 30 * time.Second

// ForwardPortOffset derives the default forwarding port from the raft port.
const ForwardPortOffset = 1000

// durationKeys are the config file keys of Config's durations, which the
// file writes as the flags do ("500ms", "10s"): every time.Duration (or
// *time.Duration) field's JSON name, so a duration added to Config is read
// like the others.
var durationKeys = func() []string {
	var keys []string
	t := reflect.TypeFor[Config]()
	for i := range t.NumField() {
		f := t.Field(i)
		if f.Type != reflect.TypeFor[time.Duration]() && f.Type != reflect.TypeFor[*time.Duration]() {
			continue
		}
		if name, _, _ := strings.Cut(f.Tag.Get("json"), ","); name != "" && name != "-" {
			keys = append(keys, name)
		}
	}
	return keys
}()

// LoadConfigFile reads a YAML or JSON config file.
func LoadConfigFile(path string) (Config, error) {
	var c Config
	b, err := os.ReadFile(path)
	if err != nil {
		return c, fmt.Errorf("config file: %w", err)
	}
	js, err := yaml.YAMLToJSON(b)
	if err != nil {
		return c, fmt.Errorf("config file %s: %w", path, err)
	}
	// Durations are written as in the flags ("500ms", "10s").
	var raw map[string]any
	if err := json.Unmarshal(js, &raw); err != nil {
		return c, fmt.Errorf("config file %s: %w", path, err)
	}
	for _, k := range durationKeys {
		if v, ok := raw[k].(string); ok {
			d, err := time.ParseDuration(v)
			if err != nil {
				return c, fmt.Errorf("config file %s: %s: %v (write durations like 500ms or 10s)", path, k, err)
			}
			raw[k] = int64(d)
		}
	}
	js, _ = json.Marshal(raw)
	dec := json.NewDecoder(strings.NewReader(string(js)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return c, fmt.Errorf("config file %s: %w (keys are the flag names with '_' for '-')", path, err)
	}
	return c, nil
}

// Merge returns c with every non-zero field of over applied.
func (c Config) Merge(over Config) Config {
	set := func(dst *string, v string) {
		if v != "" {
			*dst = v
		}
	}
	if over.OpenNode != nil {
		c.OpenNode = over.OpenNode
	}
	set(&c.NodeID, over.NodeID)
	set(&c.DataDir, over.DataDir)
	set(&c.RaftAddr, over.RaftAddr)
	set(&c.RaftAdvertise, over.RaftAdvertise)
	set(&c.Peers, over.Peers)
	set(&c.Socket, over.Socket)
	set(&c.ClientAddr, over.ClientAddr)
	set(&c.HTTPAddr, over.HTTPAddr)
	set(&c.ForwardAddr, over.ForwardAddr)
	set(&c.ForwardAdvertise, over.ForwardAdvertise)
	set(&c.LogLevel, over.LogLevel)
	set(&c.LogFormat, over.LogFormat)
	set(&c.Version, over.Version)
	set(&c.TLSCA, over.TLSCA)
	set(&c.TLSCert, over.TLSCert)
	set(&c.TLSKey, over.TLSKey)
	if over.InsecurePlaintext {
		c.InsecurePlaintext = true
	}
	set(&c.AllowAdminUIDs, over.AllowAdminUIDs)
	set(&c.AllowAdminGIDs, over.AllowAdminGIDs)
	set(&c.AllowWorkerUIDs, over.AllowWorkerUIDs)
	set(&c.AllowWorkerGIDs, over.AllowWorkerGIDs)
	set(&c.AllowReadUIDs, over.AllowReadUIDs)
	set(&c.AllowReadGIDs, over.AllowReadGIDs)
	set(&c.ClientRole, over.ClientRole)
	set(&c.SnapshotDir, over.SnapshotDir)
	if over.SnapshotInterval != 0 {
		c.SnapshotInterval = over.SnapshotInterval
	}
	if over.SnapshotRetain != 0 {
		c.SnapshotRetain = over.SnapshotRetain
	}
	if over.Pprof {
		c.Pprof = true
	}
	if over.MaxConns != 0 {
		c.MaxConns = over.MaxConns
	}
	if over.MaxConnsPerUID != 0 {
		c.MaxConnsPerUID = over.MaxConnsPerUID
	}
	if over.LineTimeout != 0 {
		c.LineTimeout = over.LineTimeout
	}
	if over.IdleTimeout != 0 {
		c.IdleTimeout = over.IdleTimeout
	}
	if over.MaxPartialBytes != 0 {
		c.MaxPartialBytes = over.MaxPartialBytes
	}
	if over.MaxSubscriptions != 0 {
		c.MaxSubscriptions = over.MaxSubscriptions
	}
	if over.MaxLine != 0 {
		c.MaxLine = over.MaxLine
	}
	if over.RaftMultiplier != 0 {
		c.RaftMultiplier = over.RaftMultiplier
	}
	if over.HeartbeatTimeout != 0 {
		c.HeartbeatTimeout = over.HeartbeatTimeout
	}
	if over.ElectionTimeout != 0 {
		c.ElectionTimeout = over.ElectionTimeout
	}
	if over.LeaderLeaseTimeout != 0 {
		c.LeaderLeaseTimeout = over.LeaderLeaseTimeout
	}
	if over.CommitTimeout != 0 {
		c.CommitTimeout = over.CommitTimeout
	}
	if over.RaftLogCacheBytes != 0 {
		c.RaftLogCacheBytes = over.RaftLogCacheBytes
	}
	if over.StateCacheBytes != 0 {
		c.StateCacheBytes = over.StateCacheBytes
	}
	if over.StateWriteWindow != nil {
		c.StateWriteWindow = over.StateWriteWindow
	}
	if over.FollowerApplyNice != nil {
		c.FollowerApplyNice = over.FollowerApplyNice
	}
	if over.RaftLogStore != "" {
		c.RaftLogStore = over.RaftLogStore
	}
	if over.ShutdownTimeout != 0 {
		c.ShutdownTimeout = over.ShutdownTimeout
	}
	if over.IdleTypeAfter != 0 {
		c.IdleTypeAfter = over.IdleTypeAfter
	}
	if over.UpgradeAutoFinalize != 0 {
		c.UpgradeAutoFinalize = over.UpgradeAutoFinalize
	}
	if over.AutopilotCleanupDeadServers != nil {
		c.AutopilotCleanupDeadServers = over.AutopilotCleanupDeadServers
	}
	if over.AutopilotMinQuorum != 0 {
		c.AutopilotMinQuorum = over.AutopilotMinQuorum
	}
	if over.AutopilotLastContactThreshold != 0 {
		c.AutopilotLastContactThreshold = over.AutopilotLastContactThreshold
	}
	if over.AutopilotServerStabilizationTime != 0 {
		c.AutopilotServerStabilizationTime = over.AutopilotServerStabilizationTime
	}
	if over.AutopilotDeadServerAfter != 0 {
		c.AutopilotDeadServerAfter = over.AutopilotDeadServerAfter
	}
	return c
}

// Normalize fills defaults and checks the config, returning every problem.
func (c *Config) Normalize() error {
	var problems []string
	if c.NodeID == "" {
		problems = append(problems, "--node-id is required (a name for this node, e.g. n1)")
	}
	if c.DataDir == "" {
		problems = append(problems, "--data-dir is required (where this node keeps its raft log and state)")
	}
	if c.RaftAddr == "" {
		c.RaftAddr = "127.0.0.1:7001"
	}
	if c.Socket == "" && c.DataDir != "" {
		c.Socket = filepath.Join(c.DataDir, "flowd.sock")
	}
	if c.MaxLine == 0 {
		c.MaxLine = 4 << 20
	}
	if c.ShutdownTimeout == 0 {
		c.ShutdownTimeout = 10 * time.Second
	}
	if c.IdleTypeAfter == 0 {
		c.IdleTypeAfter = DefaultIdleTypeAfter
	}
	if c.UpgradeAutoFinalize == 0 {
		c.UpgradeAutoFinalize = DefaultUpgradeAutoFinalize
	}
	if c.IdleTypeAfter < 0 {
		problems = append(problems, fmt.Sprintf("--idle-type-after %s must be positive (default %s)", c.IdleTypeAfter, DefaultIdleTypeAfter))
	}
	explicitForward := c.ForwardAddr != ""
	if !explicitForward {
		addr, err := DeriveForwardAddr(c.RaftAddr)
		if err != nil {
			problems = append(problems, err.Error())
		}
		c.ForwardAddr = addr
	}
	if c.ForwardAdvertise == "" {
		c.ForwardAdvertise = c.ForwardAddr
		if host, port, err := net.SplitHostPort(c.ForwardAddr); err == nil && c.RaftAdvertise != "" && unspecified(host) {
			// Listening on all interfaces: peers reach us at the raft
			// advertise host, on the forwarding port.
			if advHost, _, err := net.SplitHostPort(c.RaftAdvertise); err == nil {
				c.ForwardAdvertise = net.JoinHostPort(advHost, port)
			}
		} else if !explicitForward && c.RaftAdvertise != "" {
			if adv, err := DeriveForwardAddr(c.RaftAdvertise); err == nil {
				c.ForwardAdvertise = adv
			}
		}
	}
	if w := c.StateWriteWindow; w != nil && *w < 0 {
		problems = append(problems, fmt.Sprintf("--state-write-window %v must not be negative (0: every commit written at once)", *w))
	}
	if n := c.FollowerApplyNice; n != nil && (*n < 0 || *n > 19) {
		problems = append(problems, fmt.Sprintf("--follower-apply-nice %d must be 0 (apply at the agent's priority) to 19 (the lowest a thread can have)", *n))
	}
	if c.RaftLogCacheBytes < 0 || c.StateCacheBytes < 0 {
		problems = append(problems, "--raft-log-cache-bytes and --state-cache-bytes must not be negative (0: the defaults, 64 MiB and 32 MiB)")
	}
	if err := cluster.CheckLogStore(c.RaftLogStore); err != nil {
		problems = append(problems, err.Error())
	}
	if c.CommitTimeout != 0 && (c.CommitTimeout < time.Millisecond || 2*c.CommitTimeout > readFenceWait) {
		// A follower may learn a commit up to twice this late once traffic
		// stops, and a read behind its read fence waits at most
		// readFenceWait before it is served from what is applied.
		problems = append(problems, fmt.Sprintf("--raft-commit-timeout %s must be between 1ms and %s", c.CommitTimeout, readFenceWait/2))
	}
	t := c.RaftTiming()
	problems = append(problems, t.Check("--raft-multiplier", "--raft-heartbeat-timeout", "--raft-election-timeout", "--raft-leader-lease-timeout")...)
	c.RaftMultiplier, c.HeartbeatTimeout, c.ElectionTimeout, c.LeaderLeaseTimeout = t.Multiplier, t.Heartbeat, t.Election, t.LeaderLease
	if _, err := newAccessPolicy(c); err != nil {
		problems = append(problems, err.Error())
	}
	if c.ClientRole == "" {
		c.ClientRole = "none"
	}
	if _, err := parseRoles(c.ClientRole); err != nil {
		problems = append(problems, "--client-role: "+err.Error())
	}
	if c.SnapshotDir == "" && c.DataDir != "" {
		c.SnapshotDir = filepath.Join(c.DataDir, "snapshots")
	}
	if c.MaxSubscriptions == 0 {
		c.MaxSubscriptions = DefaultMaxSubscriptions
	}
	if c.SnapshotRetain == 0 {
		c.SnapshotRetain = DefaultSnapshotRetain
	}
	switch {
	case c.SnapshotInterval < 0 || (c.SnapshotInterval > 0 && c.SnapshotInterval < MinSnapshotInterval):
		problems = append(problems, fmt.Sprintf("--snapshot-interval %s must be at least %s (0: no scheduled snapshots)", c.SnapshotInterval, MinSnapshotInterval))
	case c.SnapshotRetain < 0:
		problems = append(problems, fmt.Sprintf("--snapshot-retain %d must be at least 1 (default %d)", c.SnapshotRetain, DefaultSnapshotRetain))
	case c.SnapshotInterval > 0 && c.SnapshotDir == "":
		problems = append(problems, "--snapshot-interval needs --snapshot-dir (or --data-dir) for the files")
	}
	if _, err := cluster.ParsePeers(c.Peers); err != nil {
		problems = append(problems, "--peers: "+err.Error())
	}
	if _, err := parseLevel(c.LogLevel); err != nil {
		problems = append(problems, err.Error())
	}
	if len(problems) > 0 {
		return fmt.Errorf("invalid agent configuration:\n  - %s", strings.Join(problems, "\n  - "))
	}
	return nil
}

func unspecified(host string) bool {
	ip := net.ParseIP(host)
	return host == "" || (ip != nil && ip.IsUnspecified())
}

// RaftTiming is raft's timing as configured: the base timeouts times the
// multiplier, explicit timeouts overriding them.
func (c *Config) RaftTiming() cluster.RaftTiming {
	return cluster.RaftTiming{Multiplier: c.RaftMultiplier, Heartbeat: c.HeartbeatTimeout,
		Election: c.ElectionTimeout, LeaderLease: c.LeaderLeaseTimeout}.Resolve()
}

// DeriveForwardAddr returns the default forwarding address for a raft
// address: same host, port + ForwardPortOffset.
func DeriveForwardAddr(raftAddr string) (string, error) {
	host, port, err := net.SplitHostPort(raftAddr)
	if err != nil {
		return "", fmt.Errorf("--raft-addr %q: %v", raftAddr, err)
	}
	p, err := strconv.Atoi(port)
	if err != nil || p+ForwardPortOffset > 65535 {
		return "", fmt.Errorf("--raft-addr %q: cannot derive the forwarding port (raft port + %d); set --forward-addr", raftAddr, ForwardPortOffset)
	}
	return net.JoinHostPort(host, strconv.Itoa(p+ForwardPortOffset)), nil
}

func parseLevel(s string) (slog.Level, error) {
	switch strings.ToLower(s) {
	case "", "info":
		return slog.LevelInfo, nil
	case "debug":
		return slog.LevelDebug, nil
	case "warn", "warning":
		return slog.LevelWarn, nil
	case "error":
		return slog.LevelError, nil
	}
	return 0, fmt.Errorf("--log-level %q must be debug, info, warn or error", s)
}

// NewLogger builds the agent's slog logger on stderr.
func NewLogger(level, format string) *slog.Logger { return NewLoggerTo(os.Stderr, level, format) }

// NewLoggerTo builds the agent's slog logger writing to w.
func NewLoggerTo(w io.Writer, level, format string) *slog.Logger {
	lv, _ := parseLevel(level)
	opts := &slog.HandlerOptions{Level: lv}
	if strings.ToLower(format) == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}
