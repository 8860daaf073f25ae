// Package pki makes and loads the certificates flowd nodes authenticate each
// other with (`flowd tls ca create`, `flowd tls cert create`), and builds the
// mutual-TLS configurations of the raft stream layer and the forwarding
// port from them.
//
// # Identity
//
// A node certificate is signed by the cluster CA, carries the node id as
// its subject common name and as a DNS SAN (plus any --dns/--ip the
// operator asked for), the organizational unit NodeOU, and both the server
// and the client extended key usage (a node dials and is dialled). The
// identity of a peer is its certificate's common name, and only if the
// certificate is a node certificate (NodeOU) whose SANs include that name:
// a certificate this CA may later sign for something else (a client role)
// never passes for a node, and an extra --dns name never makes a
// certificate speak for another node. The caller decides what an identity
// may do (the raft layer and the forwarding port accept only members of
// the current raft configuration).
//
// # Verification
//
// Both sides verify the chain against the CA themselves, in
// tls.Config.VerifyConnection (the crypto/tls pattern for custom
// verification), instead of through ServerName/ClientCAs: a dialer often
// knows the address and the set of acceptable node ids but not one host
// name, and the CA pool must follow a reload without rebuilding listeners.
// The certificate a node presents is read through GetCertificate /
// GetClientCertificate, so a reload (SIGHUP) is served to every new
// connection at once; established connections keep the certificate they
// were made with until they close.
//
// # Why no library
//
// Everything here is crypto/tls and crypto/x509 from the standard library:
// ECDSA P-256 keys, a ten-year CA, node certificates valid for three years
// by default (nomad's and consul's `tls` commands make the same shape).
// What is written by hand is only the template of each certificate and the
// PEM files; a PKI library (cfssl, step) would add a dependency tree for
// about a hundred lines and none of the identity rule above.
package pki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"time"
)

// NodeOU is the organizational unit of every node certificate.
const NodeOU = "flowd node"

// Default validity periods.
const (
	DefaultCAValidity   = 10 * 365 * 24 * time.Hour
	DefaultCertValidity = 3 * 365 * 24 * time.Hour
)

// Errors of the package.
var (
	// ErrNotNode: the peer's certificate is valid for the CA but is not a
	// node certificate (no NodeOU, or its name is not among its SANs).
	ErrNotNode = errors.New("the peer certificate is not a flowd node certificate")
	// ErrExists: a file that would be written already exists.
	ErrExists = errors.New("file exists")
)

// CAFiles returns the CA certificate and key paths in dir.
func CAFiles(dir string) (cert, key string) {
	return filepath.Join(dir, "ca.pem"), filepath.Join(dir, "ca-key.pem")
}

// NodeFiles returns node id's certificate and key paths in dir.
func NodeFiles(dir, id string) (cert, key string) {
	return filepath.Join(dir, id+".pem"), filepath.Join(dir, id+"-key.pem")
}

// CreateCA writes a new cluster CA to dir (ca.pem, ca-key.pem 0600). It
// refuses to overwrite either file (ErrExists).
func CreateCA(dir string, validity time.Duration) (certPath, keyPath string, err error) {
	if validity <= 0 {
		validity = DefaultCAValidity
	}
	certPath, keyPath = CAFiles(dir)
	if err := refuseExisting(certPath, keyPath); err != nil {
		return "", "", err
	}
	key, serial, err := newKeyAndSerial()
	if err != nil {
		return "", "", err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "flowd cluster CA " + serial.Text(16)[:8], Organization: []string{"flowd"}},
		NotBefore:             now.Add(-time.Minute),
		NotAfter:              now.Add(validity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return "", "", err
	}
	return certPath, keyPath, writePair(dir, certPath, keyPath, der, key)
}

// NodeCertOptions are the optional parts of a node certificate.
type NodeCertOptions struct {
	IPs      []net.IP
	DNSNames []string
	Validity time.Duration
}

// CreateNodeCert signs a certificate for node id with the CA in caDir and
// writes it to dir (ID.pem, ID-key.pem 0600). It refuses to overwrite
// either file (ErrExists).
func CreateNodeCert(caDir, id, dir string, opts NodeCertOptions) (certPath, keyPath string, err error) {
	if err := ValidNodeID(id); err != nil {
		return "", "", err
	}
	if opts.Validity <= 0 {
		opts.Validity = DefaultCertValidity
	}
	caCertPath, caKeyPath := CAFiles(caDir)
	ca, err := tls.LoadX509KeyPair(caCertPath, caKeyPath)
	if err != nil {
		return "", "", fmt.Errorf("load the CA from %s: %w (create it with `flowd tls ca create --dir %s`)", caDir, err, caDir)
	}
	caCert, err := x509.ParseCertificate(ca.Certificate[0])
	if err != nil {
		return "", "", err
	}
	certPath, keyPath = NodeFiles(dir, id)
	if err := refuseExisting(certPath, keyPath); err != nil {
		return "", "", err
	}
	key, serial, err := newKeyAndSerial()
	if err != nil {
		return "", "", err
	}
	now := time.Now()
	notAfter := now.Add(opts.Validity)
	if notAfter.After(caCert.NotAfter) {
		notAfter = caCert.NotAfter
	}
	dns := []string{id}
	for _, d := range opts.DNSNames {
		if d != "" && !slices.Contains(dns, d) {
			dns = append(dns, d)
		}
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: id, OrganizationalUnit: []string{NodeOU}, Organization: []string{"flowd"}},
		NotBefore:    now.Add(-time.Minute),
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		DNSNames:     dns,
		IPAddresses:  opts.IPs,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, ca.PrivateKey)
	if err != nil {
		return "", "", err
	}
	return certPath, keyPath, writePair(dir, certPath, keyPath, der, key)
}

// ValidNodeID checks that id can name a certificate and its files.
func ValidNodeID(id string) error {
	if id == "" {
		return errors.New("a node id is required (--node ID)")
	}
	for _, r := range id {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '.' || r == '_') {
			return fmt.Errorf("node id %q: use letters, digits, '-', '_' and '.' only", id)
		}
	}
	return nil
}

// newKeyAndSerial makes a certificate's P-256 key and random serial.
func newKeyAndSerial() (*ecdsa.PrivateKey, *big.Int, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	serial, err := newSerial()
	return key, serial, err
}

func newSerial() (*big.Int, error) {
	return rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
}

func refuseExisting(paths ...string) error {
	for _, p := range paths {
		if _, err := os.Lstat(p); err == nil {
			return fmt.Errorf("%w: %s; remove it first or choose another --dir (existing certificates are never overwritten)", ErrExists, p)
		}
	}
	return nil
}

func writePair(dir, certPath, keyPath string, der []byte, key *ecdsa.PrivateKey) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	kb, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return err
	}
	if err := writeExcl(keyPath, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kb}), 0o600); err != nil {
		return err
	}
	if err := writeExcl(certPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		_ = os.Remove(keyPath)
		return err
	}
	return nil
}

func writeExcl(path string, b []byte, mode os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		if errors.Is(err, os.ErrExist) {
			return fmt.Errorf("%w: %s; remove it first or choose another --dir", ErrExists, path)
		}
		return err
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// NodeID returns the node identity of a certificate (see the package doc)
// or ErrNotNode. It does not verify the chain.
func NodeID(c *x509.Certificate) (string, error) {
	id := c.Subject.CommonName
	if id == "" || !slices.Contains(c.Subject.OrganizationalUnit, NodeOU) || !slices.Contains(c.DNSNames, id) {
		return "", fmt.Errorf("%w (subject %q)", ErrNotNode, c.Subject.String())
	}
	return id, nil
}

// Files names the three PEM files of a node.
type Files struct {
	CA, Cert, Key string
}

// material is one loaded generation of a node's certificates.
type material struct {
	cert   *tls.Certificate
	leaf   *x509.Certificate
	pool   *x509.CertPool
	loaded time.Time
}

// Store holds a node's certificate, key and CA pool, reloadable. Its
// methods are safe for concurrent use; a reload is atomic (a connection
// sees either the old or the new generation, never a mix).
type Store struct {
	files Files
	id    string // the node id the certificate must name; "" = any
	cur   atomic.Pointer[material]
}

// Load reads files and checks them: the key matches the certificate, the
// certificate chains to the CA, is a node certificate and, when nodeID is
// not empty, names nodeID.
func Load(files Files, nodeID string) (*Store, error) {
	s := &Store{files: files, id: nodeID}
	if err := s.Reload(); err != nil {
		return nil, err
	}
	return s, nil
}

// Reload reads the files again and, if they pass the same checks as Load,
// serves them to new connections. On error the old generation stays.
func (s *Store) Reload() error {
	m, err := load(s.files, s.id)
	if err != nil {
		return err
	}
	s.cur.Store(m)
	return nil
}

func load(f Files, wantID string) (*material, error) {
	caPEM, err := os.ReadFile(f.CA)
	if err != nil {
		return nil, fmt.Errorf("read --tls-ca: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, fmt.Errorf("--tls-ca %s holds no PEM certificate", f.CA)
	}
	cert, err := tls.LoadX509KeyPair(f.Cert, f.Key)
	if err != nil {
		return nil, fmt.Errorf("load --tls-cert %s / --tls-key %s: %w", f.Cert, f.Key, err)
	}
	leaf := cert.Leaf
	if leaf == nil {
		if leaf, err = x509.ParseCertificate(cert.Certificate[0]); err != nil {
			return nil, err
		}
	}
	inter := x509.NewCertPool()
	for _, der := range cert.Certificate[1:] {
		if c, err := x509.ParseCertificate(der); err == nil {
			inter.AddCert(c)
		}
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, Intermediates: inter,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}); err != nil {
		return nil, fmt.Errorf("--tls-cert %s is not valid for --tls-ca %s: %w (sign it with `flowd tls cert create --ca-dir DIR --node ID`)", f.Cert, f.CA, err)
	}
	id, err := NodeID(leaf)
	if err != nil {
		return nil, fmt.Errorf("--tls-cert %s: %w (make one with `flowd tls cert create`)", f.Cert, err)
	}
	if wantID != "" && id != wantID {
		return nil, fmt.Errorf("--tls-cert %s is for node %q, but this is node %q; use %s's certificate or make one with `flowd tls cert create --node %s`", f.Cert, id, wantID, wantID, wantID)
	}
	cert.Leaf = leaf
	return &material{cert: &cert, leaf: leaf, pool: pool, loaded: time.Now()}, nil
}

// Leaf returns the certificate currently served.
func (s *Store) Leaf() *x509.Certificate { return s.cur.Load().leaf }

// Files returns the paths the store reads.
func (s *Store) Files() Files { return s.files }

// Describe summarises the current certificate for logs.
func (s *Store) Describe() []any {
	l := s.Leaf()
	return []any{"tls_node", l.Subject.CommonName, "tls_serial", l.SerialNumber.Text(16), "tls_not_after", l.NotAfter.UTC().Format(time.RFC3339)}
}

// verifyPeer verifies a peer's chain against the current CA for usage and
// returns its node identity.
func (s *Store) verifyPeer(cs tls.ConnectionState, usage x509.ExtKeyUsage) (string, error) {
	if len(cs.PeerCertificates) == 0 {
		return "", errors.New("the peer presented no certificate (node traffic requires a certificate from the cluster CA)")
	}
	m := s.cur.Load()
	inter := x509.NewCertPool()
	for _, c := range cs.PeerCertificates[1:] {
		inter.AddCert(c)
	}
	leaf := cs.PeerCertificates[0]
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: m.pool, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{usage}}); err != nil {
		return "", fmt.Errorf("peer certificate %q is not signed by the cluster CA: %w", leaf.Subject.CommonName, err)
	}
	return NodeID(leaf)
}

// ServerConfig returns the configuration of a listener that requires a
// client certificate from the CA whose node identity passes check (which
// decides whether that node may talk to this one; for flowd, whether it is
// a member of the current raft configuration). A peer
// that fails gets a TLS alert and the connection ends in the handshake.
func (s *Store) ServerConfig(check func(id string) error) *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS13,
		ClientAuth: tls.RequireAnyClientCert, // verified below, against the current CA
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			return s.cur.Load().cert, nil
		},
		VerifyConnection: func(cs tls.ConnectionState) error {
			id, err := s.verifyPeer(cs, x509.ExtKeyUsageClientAuth)
			if err != nil {
				return err
			}
			return check(id)
		},
	}
}

// ClientConfig returns the configuration of a dialer that presents this
// node's certificate and accepts a server whose certificate is from the CA
// and whose node identity passes check.
func (s *Store) ClientConfig(check func(id string) error) *tls.Config {
	return &tls.Config{
		MinVersion:         tls.VersionTLS13,
		InsecureSkipVerify: true, // verified in VerifyConnection, against the current CA
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			return s.cur.Load().cert, nil
		},
		VerifyConnection: func(cs tls.ConnectionState) error {
			id, err := s.verifyPeer(cs, x509.ExtKeyUsageServerAuth)
			if err != nil {
				return err
			}
			return check(id)
		},
	}
}

// PeerID returns the node identity of an established TLS connection's peer
// ("" if c is not a TLS connection or has no verified peer).
func PeerID(c net.Conn) string {
	tc, ok := c.(*tls.Conn)
	if !ok {
		return ""
	}
	cs := tc.ConnectionState()
	if !cs.HandshakeComplete || len(cs.PeerCertificates) == 0 {
		return ""
	}
	id, _ := NodeID(cs.PeerCertificates[0])
	return id
}

// ParseIPs parses --ip values.
func ParseIPs(vals []string) ([]net.IP, error) {
	var out []net.IP
	for _, v := range vals {
		for _, p := range strings.Split(v, ",") {
			p = strings.TrimSpace(p)
			if p == "" {
				continue
			}
			ip := net.ParseIP(p)
			if ip == nil {
				return nil, fmt.Errorf("--ip %q is not an IP address", p)
			}
			out = append(out, ip)
		}
	}
	return out, nil
}
