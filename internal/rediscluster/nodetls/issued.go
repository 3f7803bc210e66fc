package nodetls

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"slices"
	"sync"

	"k8s.io/apimachinery/pkg/types"
)

// issuedCertsKept is how many of a cluster's latest certificates issuedCerts remembers.
const issuedCertsKept = 8

// issuedCerts remembers, per cluster, the last certificates this process read in the
// cluster's TLS Secret. A node still serving one of them after the trust moved on (a CA
// rotation that completed before the node loaded the last stage's certificate) can then
// still be told to reload: the operator accepts exactly those certificates, whose keys
// only the Secret's holders have, and no other certificate of a dropped CA.
type issuedCerts struct {
	mu   sync.Mutex
	seen map[types.NamespacedName][][]byte
}

// add records der as a certificate of cluster.
func (c *issuedCerts) add(cluster types.NamespacedName, der []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.seen == nil {
		c.seen = map[types.NamespacedName][][]byte{}
	}
	kept := c.seen[cluster]
	if slices.ContainsFunc(kept, func(d []byte) bool { return bytes.Equal(d, der) }) {
		return
	}
	kept = append(kept, slices.Clone(der))
	c.seen[cluster] = kept[max(0, len(kept)-issuedCertsKept):]
}

// has reports whether der is one of cluster's recorded certificates.
func (c *issuedCerts) has(cluster types.NamespacedName, der []byte) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.ContainsFunc(c.seen[cluster], func(d []byte) bool { return bytes.Equal(d, der) })
}

// forget drops a deleted cluster's certificates.
func (c *issuedCerts) forget(cluster types.NamespacedName) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.seen, cluster)
}

// trustingIssued is cfg that also accepts a node presenting exactly a certificate issued
// reports as the cluster's own; any other certificate must verify as cfg would verify it.
func trustingIssued(cfg *tls.Config, issued func(der []byte) bool) *tls.Config {
	out := cfg.Clone()
	roots, name := cfg.RootCAs, cfg.ServerName
	out.InsecureSkipVerify = true //nolint:gosec // verified by VerifyConnection: the chain as usual, or one of the cluster's own certificates
	out.VerifyConnection = func(cs tls.ConnectionState) error {
		if len(cs.PeerCertificates) == 0 {
			return errors.New("the node presented no certificate")
		}
		leaf := cs.PeerCertificates[0]
		if issued(leaf.Raw) {
			return nil
		}
		intermediates := x509.NewCertPool()
		for _, c := range cs.PeerCertificates[1:] {
			intermediates.AddCert(c)
		}
		_, err := leaf.Verify(x509.VerifyOptions{Roots: roots, Intermediates: intermediates, DNSName: name})
		return err
	}
	return out
}
