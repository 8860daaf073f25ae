package pki

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"net"
	"os"
	"testing"
)

func TestNodeCertificateShapeAndIdentity(t *testing.T) {
	dir := t.TempDir()
	if _, _, err := CreateCA(dir, 0); err != nil {
		t.Fatal(err)
	}
	if _, _, err := CreateCA(dir, 0); !errors.Is(err, ErrExists) {
		t.Fatalf("CA overwritten: %v", err)
	}
	cert, key, err := CreateNodeCert(dir, "n1", dir, NodeCertOptions{IPs: []net.IP{net.IPv4(10, 0, 0, 1)}, DNSNames: []string{"n1.example.com"}})
	if err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(key); fi.Mode().Perm() != 0o600 {
		t.Fatalf("key mode %v", fi.Mode())
	}
	ca, _ := CAFiles(dir)
	s, err := Load(Files{CA: ca, Cert: cert, Key: key}, "n1")
	if err != nil {
		t.Fatal(err)
	}
	l := s.Leaf()
	if l.Subject.CommonName != "n1" || len(l.DNSNames) != 2 || l.DNSNames[0] != "n1" || !l.IPAddresses[0].Equal(net.IPv4(10, 0, 0, 1)) {
		t.Fatalf("certificate: %v %v %v", l.Subject, l.DNSNames, l.IPAddresses)
	}
	if l.PublicKeyAlgorithm != x509.ECDSA {
		t.Fatalf("key algorithm %v", l.PublicKeyAlgorithm)
	}
	if _, err := Load(Files{CA: ca, Cert: cert, Key: key}, "n2"); err == nil {
		t.Fatal("n1's certificate loaded as n2")
	}
	if id, err := NodeID(l); err != nil || id != "n1" {
		t.Fatalf("NodeID %q %v", id, err)
	}
	// Not a node certificate: no OU, or a common name not among the SANs.
	for _, c := range []*x509.Certificate{
		{Subject: pkix.Name{CommonName: "n1"}, DNSNames: []string{"n1"}},
		{Subject: pkix.Name{CommonName: "n2", OrganizationalUnit: []string{NodeOU}}, DNSNames: []string{"n1", "*.example"}},
	} {
		if _, err := NodeID(c); !errors.Is(err, ErrNotNode) {
			t.Fatalf("%v accepted: %v", c.Subject, err)
		}
	}
	// A certificate from another CA does not load against this one.
	other := t.TempDir()
	CreateCA(other, 0)
	oc, ok, _ := CreateNodeCert(other, "n1", other, NodeCertOptions{})
	if _, err := Load(Files{CA: ca, Cert: oc, Key: ok}, "n1"); err == nil {
		t.Fatal("a certificate from another CA loaded")
	}
	if err := ValidNodeID("../etc"); err == nil {
		t.Fatal("a path as node id")
	}
}
