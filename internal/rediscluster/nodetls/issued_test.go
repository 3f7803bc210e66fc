package nodetls

import (
	"crypto/tls"
	"crypto/x509"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/middleware-operator/middleware-operator/internal/certs"
)

// TestTrustingIssuedAcceptsOnlyTheClustersOwnEarlierCertificates: after a CA rotation
// dropped the old CA, a node still serving the cluster's earlier certificate (signed by the
// old CA) is accepted for a reload, another certificate of the old CA is not, and a
// certificate of the current CA still is.
func TestTrustingIssuedAcceptsOnlyTheClustersOwnEarlierCertificates(t *testing.T) {
	now := time.Now()
	const name = "cache.ns.svc"
	oldCA, newCA := twoCAs(t, now)
	leaf := func(ca certs.Pair) *x509.Certificate {
		t.Helper()
		p, err := certs.NewServer(ca, []string{name}, nil, now, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		c, err := certs.ParseCert(p.Cert)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	earlier, stranger, current := leaf(oldCA), leaf(oldCA), leaf(newCA)
	pool, err := certs.Pool(newCA.Cert)
	if err != nil {
		t.Fatal(err)
	}
	cluster := types.NamespacedName{Namespace: "ns", Name: "cache"}
	var issued issuedCerts
	issued.add(cluster, earlier.Raw)
	cfg := trustingIssued(&tls.Config{RootCAs: pool, ServerName: name, MinVersion: tls.VersionTLS12},
		func(der []byte) bool { return issued.has(cluster, der) })
	for what, tc := range map[string]struct {
		leaf *x509.Certificate
		ok   bool
	}{
		"the cluster's earlier certificate, of the dropped CA": {earlier, true},
		"another certificate of the dropped CA":                {stranger, false},
		"a certificate of the current CA":                      {current, true},
	} {
		err := cfg.VerifyConnection(tls.ConnectionState{PeerCertificates: []*x509.Certificate{tc.leaf}})
		if (err == nil) != tc.ok {
			t.Errorf("%s: accepted = %v (%v), want %v", what, err == nil, err, tc.ok)
		}
	}
	issued.forget(cluster)
	if err := cfg.VerifyConnection(tls.ConnectionState{PeerCertificates: []*x509.Certificate{earlier}}); err == nil {
		t.Error("a forgotten cluster's earlier certificate is still accepted")
	}
	for range issuedCertsKept + 2 {
		issued.add(cluster, leaf(oldCA).Raw)
	}
	if n := len(issued.seen[cluster]); n != issuedCertsKept {
		t.Errorf("%d certificates kept, want the last %d", n, issuedCertsKept)
	}
}

// twoCAs are an old and a new CA, valid for an hour from now.
func twoCAs(t *testing.T, now time.Time) (certs.Pair, certs.Pair) {
	t.Helper()
	var pairs [2]certs.Pair
	for i, name := range []string{"old", "new"} {
		ca, err := certs.NewCA(name, now, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		pairs[i] = ca
	}
	return pairs[0], pairs[1]
}
