package chaos

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// Names of everything this package creates on the host. One prefix, so a
// crashed run's leftovers are found and removed by name at the next start
// (cleanupLeftovers), never anything else.
const (
	prefix   = "fdc"           // namespaces fdc-n1.., host veth ends fdc-n1h..
	bridge   = "fdc-br0"       // host bridge joining the namespaces
	nftTable = "fdchaos"       // inet table on the host holding partitions
	subnet   = "10.77.0"       // node nX is 10.77.0.X, the host is .254
	hostIP   = subnet + ".254" // where the proxies listen
	maskBits = "/24"
)

func nsName(i int) string   { return fmt.Sprintf("%s-n%d", prefix, i) }
func nodeIP(i int) string   { return fmt.Sprintf("%s.%d", subnet, i) }
func hostVeth(i int) string { return fmt.Sprintf("%s-n%dh", prefix, i) }

// run runs one command and returns its combined output.
func run(name string, args ...string) (string, error) {
	cmd := exec.Command(name, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if err != nil {
		return out.String(), fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(out.String()))
	}
	return out.String(), nil
}

// Available reports why the suite cannot run here ("" if it can): it needs
// root, ip (iproute2, with netns) and nft.
func Available() string {
	if os.Geteuid() != 0 {
		return "not root: network namespaces and nftables need root"
	}
	for _, tool := range []string{"ip", "nft"} {
		if _, err := exec.LookPath(tool); err != nil {
			return tool + " not found (apt-get install -y iproute2 nftables)"
		}
	}
	return ""
}

// Net is the test network: a bridge on the host, one namespace per node
// with a veth into the bridge, and an nftables table on the host that drops
// node-to-proxy traffic for partitions.
type Net struct {
	log   *slog.Logger
	mu    sync.Mutex
	nodes []int // namespaces created
	cut   map[[2]int]bool
	// ports of each node's proxies on the host (filled by the cluster): the
	// partition rules match them.
	proxyPorts map[int][]int
}

// cleanupLeftovers removes what a previous (crashed) run left behind:
// processes inside our namespaces (by pid, from `ip netns pids`), the
// namespaces, the bridge and host veth ends, and the nft table.
func cleanupLeftovers(log *slog.Logger) {
	out, _ := run("ip", "netns", "list")
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || !strings.HasPrefix(f[0], prefix+"-") {
			continue
		}
		ns := f[0]
		pids, _ := run("ip", "netns", "pids", ns)
		for _, p := range strings.Fields(pids) {
			if pid, err := strconv.Atoi(p); err == nil {
				log.Warn("killing leftover process in namespace", "ns", ns, "pid", pid)
				_ = syscall.Kill(pid, syscall.SIGCONT)
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		log.Warn("removing leftover namespace", "ns", ns)
		_, _ = run("ip", "netns", "del", ns)
	}
	links, _ := run("ip", "-o", "link", "show")
	for _, line := range strings.Split(links, "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		name := strings.TrimSuffix(f[1], ":")
		if i := strings.IndexByte(name, '@'); i >= 0 {
			name = name[:i]
		}
		if strings.HasPrefix(name, prefix+"-") {
			log.Warn("removing leftover link", "link", name)
			_, _ = run("ip", "link", "del", name)
		}
	}
	if _, err := run("nft", "list", "table", "inet", nftTable); err == nil {
		log.Warn("removing leftover nft table", "table", nftTable)
		_, _ = run("nft", "delete", "table", "inet", nftTable)
	}
}

// NewNet cleans up leftovers and creates the bridge and n namespaces.
// Close removes everything; call it from t.Cleanup.
func NewNet(log *slog.Logger, n int) (*Net, error) {
	cleanupLeftovers(log)
	nw := &Net{log: log, cut: map[[2]int]bool{}, proxyPorts: map[int][]int{}}
	steps := [][]string{
		{"ip", "link", "add", bridge, "type", "bridge"},
		{"ip", "addr", "add", hostIP + maskBits, "dev", bridge},
		{"ip", "link", "set", bridge, "up"},
	}
	for _, s := range steps {
		if _, err := run(s[0], s[1:]...); err != nil {
			nw.Close()
			return nil, err
		}
	}
	for i := 1; i <= n; i++ {
		if err := nw.AddNode(i); err != nil {
			nw.Close()
			return nil, err
		}
	}
	if err := nw.apply(); err != nil {
		nw.Close()
		return nil, err
	}
	return nw, nil
}

// AddNode creates namespace i with address 10.77.0.i joined to the bridge.
func (nw *Net) AddNode(i int) error {
	ns, hv := nsName(i), hostVeth(i)
	steps := [][]string{
		{"ip", "netns", "add", ns},
		{"ip", "link", "add", hv, "type", "veth", "peer", "name", "eth0", "netns", ns},
		{"ip", "link", "set", hv, "master", bridge},
		{"ip", "link", "set", hv, "up"},
		{"ip", "-n", ns, "addr", "add", nodeIP(i) + maskBits, "dev", "eth0"},
		{"ip", "-n", ns, "link", "set", "eth0", "up"},
		{"ip", "-n", ns, "link", "set", "lo", "up"},
	}
	nw.mu.Lock()
	nw.nodes = append(nw.nodes, i)
	nw.mu.Unlock()
	for _, s := range steps {
		if _, err := run(s[0], s[1:]...); err != nil {
			return err
		}
	}
	return nil
}

// SetProxyPorts records the host ports of node i's proxies (raft and
// forwarding): a partition that cuts i from j drops j's packets to them.
func (nw *Net) SetProxyPorts(i int, ports ...int) {
	nw.mu.Lock()
	nw.proxyPorts[i] = ports
	nw.mu.Unlock()
}

// Cut drops all traffic between nodes a and b (both directions), Heal
// restores every link. Rules live in the host's inet table: a node's
// packets to another node's proxy ports (and the proxy's packets back) are
// dropped, so established connections stall as on a real partition and new
// ones time out in SYN.
func (nw *Net) Cut(a, b int) error {
	nw.mu.Lock()
	if a > b {
		a, b = b, a
	}
	nw.cut[[2]int{a, b}] = true
	nw.mu.Unlock()
	return nw.apply()
}

// Partition cuts every link between the two sides.
func (nw *Net) Partition(left, right []int) error {
	nw.mu.Lock()
	for _, a := range left {
		for _, b := range right {
			x, y := min(a, b), max(a, b)
			nw.cut[[2]int{x, y}] = true
		}
	}
	nw.mu.Unlock()
	return nw.apply()
}

// Heal removes every cut.
func (nw *Net) Heal() error {
	nw.mu.Lock()
	nw.cut = map[[2]int]bool{}
	nw.mu.Unlock()
	return nw.apply()
}

// apply rewrites the nft table from the current cuts, atomically (one
// `nft -f` transaction).
func (nw *Net) apply() error {
	nw.mu.Lock()
	var rules []string
	var pairs [][2]int
	for p := range nw.cut {
		pairs = append(pairs, p)
	}
	sort.Slice(pairs, func(i, j int) bool {
		return pairs[i][0] < pairs[j][0] || pairs[i][0] == pairs[j][0] && pairs[i][1] < pairs[j][1]
	})
	for _, p := range pairs {
		for _, dir := range [][2]int{{p[0], p[1]}, {p[1], p[0]}} {
			src, dst := dir[0], dir[1]
			ports := nw.proxyPorts[dst]
			if len(ports) == 0 {
				continue
			}
			var ps []string
			for _, port := range ports {
				ps = append(ps, strconv.Itoa(port))
			}
			set := "{ " + strings.Join(ps, ", ") + " }"
			rules = append(rules,
				fmt.Sprintf("add rule inet %s in ip saddr %s tcp dport %s drop", nftTable, nodeIP(src), set),
				fmt.Sprintf("add rule inet %s out ip daddr %s tcp sport %s drop", nftTable, nodeIP(src), set))
		}
	}
	nw.mu.Unlock()
	script := fmt.Sprintf("table inet %[1]s {}\ndelete table inet %[1]s\n"+
		"table inet %[1]s {\n chain in { type filter hook input priority -10; policy accept; }\n"+
		" chain out { type filter hook output priority -10; policy accept; }\n}\n%[2]s\n",
		nftTable, strings.Join(rules, "\n"))
	cmd := exec.Command("nft", "-f", "-")
	cmd.Stdin = strings.NewReader(script)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("nft: %w: %s", err, out)
	}
	return nil
}

// Close deletes the nft table, the namespaces (their veth ends go with
// them) and the bridge. Errors are logged: teardown goes on.
func (nw *Net) Close() {
	var errs []error
	if _, err := run("nft", "list", "table", "inet", nftTable); err == nil {
		if _, err := run("nft", "delete", "table", "inet", nftTable); err != nil {
			errs = append(errs, err)
		}
	}
	nw.mu.Lock()
	nodes := nw.nodes
	nw.mu.Unlock()
	for _, i := range nodes {
		if _, err := run("ip", "netns", "del", nsName(i)); err != nil {
			errs = append(errs, err)
		}
		_, _ = run("ip", "link", "del", hostVeth(i)) // normally gone with the namespace
	}
	if _, err := run("ip", "link", "del", bridge); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		nw.log.Warn("network teardown", "err", err)
	}
}
