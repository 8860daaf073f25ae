package testagents

import (
	"fmt"
	"testing"

	"github.com/flowd/flowd/daemon"
	"github.com/flowd/flowd/internal/pki"
	"github.com/flowd/flowd/internal/testing/testutil"
)

// WithTLS makes a cluster CA and certificates for nodes n1..nN in a
// temporary directory and returns the CA's file (what clients verify a
// tls:// endpoint with) and a StartWith tweak that gives each agent its
// certificate (mutual TLS between the nodes) and a TCP client listener on
// a free loopback port (TLS with the node's certificate; see ClientAddr).
func WithTLS(t testing.TB, n int) (caFile string, tweak func(*daemon.Config)) {
	t.Helper()
	dir := t.TempDir()
	if _, _, err := pki.CreateCA(dir, 0); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= n; i++ {
		if _, _, err := pki.CreateNodeCert(dir, fmt.Sprintf("n%d", i), dir, pki.NodeCertOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	caFile, _ = pki.CAFiles(dir)
	return caFile, func(c *daemon.Config) {
		c.TLSCA = caFile
		c.TLSCert, c.TLSKey = pki.NodeFiles(dir, c.NodeID)
		c.ClientAddr = fmt.Sprintf("127.0.0.1:%d", testutil.Port(t))
	}
}

// ClientEndpoint is the tls:// endpoint of agent i's TCP client listener
// (a cluster started with WithTLS's tweak).
func (c *Cluster) ClientEndpoint(i int) string { return "tls://" + c.Agents[i].Config().ClientAddr }
