package testutil

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"testing"
	"time"

	"github.com/flowd/flowd/internal/pki"
)

// SelfSignedNode is an attacker's certificate: it looks like member id's
// in every field (common name, node unit, SAN) but is signed by its own key,
// not the cluster CA.
func SelfSignedNode(t testing.TB, id string) tls.Certificate {
	t.Helper()
	c, err := SelfSignedNodeCert(id)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// SelfSignedNodeCert is SelfSignedNode for a program (the attacker process
// of the e2e tests).
func SelfSignedNodeCert(id string) (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(7), Subject: pkix.Name{CommonName: id, OrganizationalUnit: []string{pki.NodeOU}},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), DNSNames: []string{id},
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, IsCA: true, BasicConstraintsValid: true,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth, x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}

// NodePair loads node id's certificate and key from dir (pki's file names).
func NodePair(t testing.TB, dir, id string) tls.Certificate {
	t.Helper()
	cert, key := pki.NodeFiles(dir, id)
	kp, err := tls.LoadX509KeyPair(cert, key)
	if err != nil {
		t.Fatal(err)
	}
	return kp
}
