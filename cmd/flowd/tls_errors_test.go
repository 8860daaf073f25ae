package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A TLS failure says what is wrong with TLS and what to do, never "is a
// flowd agent listening there?" nor `flowd dev`: an unknown CA asks for
// --ca-cert / FLOWD_CACERT, an expired certificate says so, and tcp://
// against a TLS listener says to use tls://.
func TestCLITLSErrorsNameTheCause(t *testing.T) {
	dir := t.TempDir()
	caCert, caKey := testCA(t, "flowd test CA")
	otherCA, _ := testCA(t, "another CA")
	writePEM(t, filepath.Join(dir, "ca.pem"), caCert.Raw)
	writePEM(t, filepath.Join(dir, "other.pem"), otherCA.Raw)

	good := tlsServer(t, leafCert(t, caCert, caKey, time.Now().Add(time.Hour)))
	expired := tlsServer(t, leafCert(t, caCert, caKey, time.Now().Add(-time.Hour)))

	for _, c := range []struct {
		name string
		args []string
		want []string
	}{
		{"tcp:// to a TLS listener", []string{"--addr", "tcp://" + good}, []string{"speaks TLS", "use tls://" + good}},
		{"tcp:// with a token", []string{"--addr", "tcp://" + good, "--token", "flowd_x"}, []string{"speaks TLS", "use tls://" + good}},
		{"no CA", []string{"--addr", "tls://" + good}, []string{"authority this client does not trust", "--ca-cert / FLOWD_CACERT"}},
		{"another CA", []string{"--addr", "tls://" + good, "--ca-cert", filepath.Join(dir, "other.pem")},
			[]string{"authority this client does not trust", "--ca-cert / FLOWD_CACERT"}},
		{"expired", []string{"--addr", "tls://" + expired, "--ca-cert", filepath.Join(dir, "ca.pem")},
			[]string{"expired", "flowd tls cert create"}},
	} {
		var out, errb bytes.Buffer
		args := append([]string{"flowd"}, c.args...)
		args = append(args, "run", "list")
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		code := run(ctx, args, strings.NewReader(""), &out, &errb)
		cancel()
		msg := errb.String()
		if code == 0 {
			t.Errorf("%s: exit 0", c.name)
		}
		for _, w := range c.want {
			if !strings.Contains(msg, w) {
				t.Errorf("%s: stderr lacks %q:\n%s", c.name, w, msg)
			}
		}
		for _, bad := range []string{"listening there", "flowd dev", "agent.auth"} {
			if strings.Contains(msg, bad) {
				t.Errorf("%s: stderr says %q:\n%s", c.name, bad, msg)
			}
		}
	}
}

func testCA(t *testing.T, name string) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-24 * time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return cert, key
}

func leafCert(t *testing.T, ca *x509.Certificate, caKey *ecdsa.PrivateKey, notAfter time.Time) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "n1"},
		NotBefore: notAfter.Add(-48 * time.Hour), NotAfter: notAfter,
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:    x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

func writePEM(t *testing.T, path string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

// tlsServer is a TLS listener with cert (no flowd behind it: the
// handshake is what is tested); it returns host:port.
func tlsServer(t *testing.T, cert tls.Certificate) string {
	t.Helper()
	srv := httptest.NewUnstartedServer(http.NotFoundHandler())
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the handshakes fail on purpose
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().String()
}
