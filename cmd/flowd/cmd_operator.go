package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/flowd/flowd/cluster"
	"github.com/flowd/flowd/cluster/raftnode"
	"github.com/flowd/flowd/daemon"
	"github.com/flowd/flowd/rpc"
)

func init() { commands = append(commands, operatorCommand) }

var operatorCommand = &cli.Command{
	Name:  "operator",
	Usage: "cluster membership, leadership and upgrades",
	Subcommands: []*cli.Command{
		{
			Name:  "raft",
			Usage: "the raft configuration",
			Subcommands: []*cli.Command{
				{Name: "list-peers", Usage: "the servers of the raft configuration and who leads", Action: raftListAction},
				{
					Name:      "add-peer",
					Usage:     "add a voter (start its agent first, with the same --peers plus itself)",
					ArgsUsage: "ID ADDR (the new node's id and raft address host:port)",
					Action:    raftAddAction,
				},
				{Name: "remove-peer", Usage: "remove a server from the configuration", ArgsUsage: "ID", Action: raftRemoveAction},
				{
					Name:      "transfer-leadership",
					Usage:     "hand leadership to another node (ID, or any up-to-date one)",
					ArgsUsage: "[ID]",
					Action:    raftTransferAction,
				},
				recoverCommand,
			},
		},
		upgradeCommand,   // cmd_upgrade.go
		autopilotCommand, // cmd_autopilot.go
	},
}

func raftListAction(cCtx *cli.Context) error {
	if err := needArgs(cCtx, 0, 0, "no arguments"); err != nil {
		return err
	}
	var res rpc.PeersResult
	if err := withClient(cCtx, func(ctx context.Context, c *rpc.Client) error {
		return c.CallIdempotent(ctx, rpc.MethodRaftPeers, struct{}{}, &res)
	}); err != nil {
		return err
	}
	w := cCtx.App.Writer
	if jsonOut(cCtx) {
		if res.Peers == nil {
			res.Peers = []rpc.Peer{}
		}
		return printJSON(w, res)
	}
	tw := newTable(w)
	row(tw, "ID", "ADDRESS", "SUFFRAGE", "STATE", "RELEASE", "FSM VERSIONS")
	for _, p := range res.Peers {
		release, versions := "-", "-"
		if m := p.Member; m != nil {
			release, versions = dash(m.Release), memberRange(*m)
		}
		row(tw, p.ID, p.Address, p.Suffrage, dash(p.State), release, versions)
	}
	return tw.Flush()
}

func raftAddAction(cCtx *cli.Context) error {
	if err := needArgs(cCtx, 2, 2, "ID ADDR"); err != nil {
		return err
	}
	id, addr := cCtx.Args().Get(0), cCtx.Args().Get(1)
	return raftOp(cCtx, rpc.MethodRaftAddPeer, rpc.PeerParams{ID: id, Address: addr}, true, fmt.Sprintf("added %s (%s) as a voter", id, addr))
}

func raftRemoveAction(cCtx *cli.Context) error {
	if err := needArgs(cCtx, 1, 1, "ID"); err != nil {
		return err
	}
	id := cCtx.Args().First()
	return raftOp(cCtx, rpc.MethodRaftRemovePeer, rpc.PeerParams{ID: id}, true, "removed "+id)
}

func raftTransferAction(cCtx *cli.Context) error {
	if err := needArgs(cCtx, 0, 1, "[ID]"); err != nil {
		return err
	}
	id := cCtx.Args().First()
	what := "leadership transferred"
	if id != "" {
		what += " to " + id
		if leads, err := alreadyLeads(cCtx, id); err != nil || leads {
			return err
		}
	}
	return raftOp(cCtx, rpc.MethodRaftTransfer, rpc.PeerParams{ID: id}, false, what)
}

func raftOp(cCtx *cli.Context, method string, p rpc.PeerParams, idempotent bool, what string) error {
	var res rpc.OK
	if err := withClient(cCtx, func(ctx context.Context, c *rpc.Client) error {
		if idempotent {
			return c.CallIdempotent(ctx, method, p, &res)
		}
		return c.Call(ctx, method, p, &res)
	}); err != nil {
		return err
	}
	if jsonOut(cCtx) {
		return printJSON(cCtx.App.Writer, res)
	}
	fmt.Fprintln(cCtx.App.Writer, what)
	return nil
}

var recoverCommand = &cli.Command{
	Name:  "recover",
	Usage: "OFFLINE: give a stopped agent's data dir a new raft configuration, after a majority of the nodes was lost for good",
	Description: "Run on the machine of the surviving node with the highest last log term and index (see --dry-run),\n" +
		"with its agent STOPPED. Its state becomes everything in its raft log, including entries the old\n" +
		"cluster may not have committed. Then start the agent with its usual flags: it leads the new\n" +
		"configuration alone; add fresh nodes with `flowd operator raft add-peer`. See docs/operations.md,\n" +
		"\"Outage recovery\".\n\n" +
		"   flowd operator raft recover --node-id n1 --data-dir /var/lib/flowd --dry-run\n" +
		"   flowd operator raft recover --node-id n1 --data-dir /var/lib/flowd      # n1 alone\n" +
		"   flowd operator raft recover --config /etc/flowd/agent.yaml --peers-file peers.json",
	Flags: []cli.Flag{
		&cli.StringFlag{Name: "config", EnvVars: []string{"FLOWD_CONFIG"}, TakesFile: true, Usage: "the agent's config file, for its node_id, data_dir, socket and state_cache_bytes (flags win)"},
		&cli.StringFlag{Name: "node-id", EnvVars: []string{"FLOWD_NODE_ID"}, Usage: "the id the agent of --data-dir runs with (required)"},
		&cli.StringFlag{Name: "data-dir", EnvVars: []string{"FLOWD_DATA_DIR"}, TakesFile: true, Usage: "the stopped agent's data dir (required)"},
		&cli.StringFlag{Name: "socket", EnvVars: []string{"FLOWD_SOCKET"}, TakesFile: true, Usage: "the agent's client socket: if an agent answers there, nothing is done", DefaultText: "DATA_DIR/flowd.sock"},
		&cli.StringFlag{Name: "peers", Usage: "the new configuration `ID=HOST:PORT,...` (voters; must include --node-id)", DefaultText: "this node alone, at its address in the old configuration"},
		&cli.StringFlag{Name: "peers-file", TakesFile: true, Usage: "the new configuration as a peers.json `FILE`: [{\"id\": \"n1\", \"address\": \"10.0.0.1:7001\"}, ...]"},
		&cli.BoolFlag{Name: "dry-run", Usage: "print what the data dir holds (last log index and term, applied index, configuration) and the configuration recover would write; change nothing"},
	},
	Action: raftRecoverAction,
}

func raftRecoverAction(cCtx *cli.Context) error {
	if err := needArgs(cCtx, 0, 0, "no arguments (the options are flags)"); err != nil {
		return err
	}
	var base daemon.Config
	if path := cCtx.String("config"); path != "" {
		c, err := daemon.LoadConfigFile(path)
		if err != nil {
			return &cliError{code: exitUsage, msg: err.Error()}
		}
		base = c
	}
	cfg := base.Merge(daemon.Config{NodeID: cCtx.String("node-id"), DataDir: cCtx.String("data-dir"), Socket: cCtx.String("socket")})
	if cfg.NodeID == "" || cfg.DataDir == "" {
		return usageErr(cCtx, "--node-id and --data-dir are required (or --config with node_id and data_dir): the stopped agent's id and data dir")
	}
	if cfg.Socket == "" {
		cfg.Socket = filepath.Join(cfg.DataDir, "flowd.sock")
	}
	var servers []cluster.Peer
	switch p, f := cCtx.String("peers"), cCtx.String("peers-file"); {
	case p != "" && f != "":
		return usageErr(cCtx, "give --peers or --peers-file, not both")
	case p != "":
		ps, err := cluster.ParsePeers(p)
		if err != nil || len(ps) == 0 {
			return usageErr(cCtx, "--peers %q: %v", p, err)
		}
		servers = ps
	case f != "":
		ps, err := raftnode.ReadPeersFile(f)
		if err != nil {
			return usageErr(cCtx, "--peers-file: %v", err)
		}
		servers = ps
	}
	if agentAnswers(cfg.Socket) {
		return failf("stop the agent (SIGTERM, or `systemctl stop flowd`), then run recover again",
			"an agent answers on %s: recover works only on a stopped agent's data dir", cfg.Socket)
	}
	ccfg := raftnode.Config{Config: cluster.Config{NodeID: cfg.NodeID, DataDir: cfg.DataDir, StateCacheBytes: cfg.StateCacheBytes,
		Logger: agentLogger(cCtx.App.ErrWriter, "warn", "text")}}
	w := cCtx.App.Writer
	if cCtx.Bool("dry-run") {
		info, err := raftnode.Inspect(ccfg)
		if err != nil {
			return recoverErr(cfg, err)
		}
		if servers == nil {
			for _, s := range info.Servers {
				if s.ID == cfg.NodeID {
					servers = []cluster.Peer{{ID: s.ID, Address: s.Address}}
				}
			}
		}
		if jsonOut(cCtx) {
			return printJSON(w, map[string]any{"data_dir": info, "would_set": servers})
		}
		printDataDir(w, cfg, info)
		fmt.Fprintf(w, "dry run: recover would set the configuration to %s (nothing was changed)\n", peerList(servers))
		return nil
	}
	start := time.Now()
	res, err := raftnode.Recover(ccfg, servers)
	if err != nil {
		return recoverErr(cfg, err)
	}
	if jsonOut(cCtx) {
		return printJSON(w, res)
	}
	printDataDir(w, cfg, res.Before)
	fmt.Fprintf(w, "recovered in %s: the configuration is now %s; state at index %d (%d log entries applied now)\n",
		time.Since(start).Round(time.Millisecond), peerList(res.Servers), res.AppliedIndex, res.Replayed)
	fmt.Fprintln(w, "next: start the agent with its usual flags (it leads alone), then add fresh nodes with `flowd operator raft add-peer ID ADDR`")
	return nil
}

func recoverErr(cfg daemon.Config, err error) error {
	if errors.Is(err, raftnode.ErrDataDirInUse) {
		return failf("stop the agent that uses it, then run recover again", "%s: %v", cfg.DataDir, err)
	}
	return failf("check --data-dir and --node-id: they must be the stopped agent's; see docs/operations.md, \"Outage recovery\"", "recover %s: %v", cfg.DataDir, err)
}

// agentAnswers reports whether an agent accepts connections on sock.
func agentAnswers(sock string) bool {
	conn, err := net.DialTimeout("unix", sock, time.Second)
	if err != nil {
		return false
	}
	conn.Close()
	return true
}

func printDataDir(w io.Writer, cfg daemon.Config, d raftnode.DataDirInfo) {
	tw := newTable(w)
	row(tw, "NODE", "LAST INDEX", "LAST TERM", "APPLIED", "SNAPSHOT", "CONFIGURATION")
	var conf []string
	for _, s := range d.Servers {
		conf = append(conf, s.ID+"="+s.Address)
	}
	row(tw, cfg.NodeID, d.LastIndex, d.LastTerm, d.AppliedIndex, d.SnapshotIndex, strings.Join(conf, ","))
	_ = tw.Flush()
}

func peerList(ps []cluster.Peer) string {
	var out []string
	for _, p := range ps {
		out = append(out, p.ID+"="+p.Address)
	}
	return strings.Join(out, ",")
}
