// Package certs makes and checks the TLS material of a RedisCluster: a self-signed CA, a
// server certificate it signs (ECDSA P-256, usable for both server and client
// authentication, as Redis nodes present the same certificate on the cluster bus and to
// their masters), when to renew it, and whether a set of PEM files belongs together. It is
// pure: the clock is a parameter, and nothing here talks to the API server.
package certs

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"time"
)

// Default lifetimes: the CA outlives many server certificates, so renewing a server
// certificate never changes the CA that clients trust.
const (
	CAValidity     = 10 * 365 * 24 * time.Hour
	ServerValidity = 365 * 24 * time.Hour
	// backdate covers clocks a little behind the operator's.
	backdate = 5 * time.Minute
)

// Pair is a PEM certificate and its PEM private key.
type Pair struct {
	Cert []byte
	Key  []byte
}

// NewCA makes a self-signed CA certificate valid from now (less a few minutes) for validity.
func NewCA(commonName string, now time.Time, validity time.Duration) (Pair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return Pair{}, fmt.Errorf("while generating the CA key: %w", err)
	}
	tmpl, err := template(commonName, now, validity)
	if err != nil {
		return Pair{}, err
	}
	tmpl.IsCA, tmpl.BasicConstraintsValid, tmpl.MaxPathLenZero = true, true, true
	tmpl.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return Pair{}, fmt.Errorf("while signing the CA certificate: %w", err)
	}
	return encode(der, key)
}

// NewServer makes a certificate for dnsNames and ips signed by ca, valid from now (less a
// few minutes) for validity, or until the CA expires if that is sooner. It allows server and
// client authentication.
func NewServer(ca Pair, dnsNames []string, ips []net.IP, now time.Time, validity time.Duration) (Pair, error) {
	caCert, caKey, err := parsePair(ca)
	if err != nil {
		return Pair{}, fmt.Errorf("the CA: %w", err)
	}
	if len(dnsNames) == 0 && len(ips) == 0 {
		return Pair{}, errors.New("a server certificate needs at least one DNS name or IP")
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return Pair{}, fmt.Errorf("while generating the server key: %w", err)
	}
	cn := ""
	if len(dnsNames) > 0 {
		cn = dnsNames[0]
	}
	tmpl, err := template(cn, now, validity)
	if err != nil {
		return Pair{}, err
	}
	if tmpl.NotAfter.After(caCert.NotAfter) {
		tmpl.NotAfter = caCert.NotAfter
	}
	tmpl.DNSNames, tmpl.IPAddresses = dnsNames, ips
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	if err != nil {
		return Pair{}, fmt.Errorf("while signing the server certificate: %w", err)
	}
	return encode(der, key)
}

// RenewAt is when a certificate should be replaced: at two thirds of its lifetime, which
// leaves a third of it for every pod to pick up the new one.
func RenewAt(certPEM []byte) (time.Time, error) {
	cert, err := ParseCert(certPEM)
	if err != nil {
		return time.Time{}, err
	}
	life := cert.NotAfter.Sub(cert.NotBefore)
	return cert.NotBefore.Add(life / 3 * 2), nil
}

// NeedsRenewal reports whether certPEM is due for renewal at now (see RenewAt), or cannot be
// read at all.
func NeedsRenewal(certPEM []byte, now time.Time) bool {
	at, err := RenewAt(certPEM)
	return err != nil || !now.Before(at)
}

// Check verifies that server is a key pair whose certificate chains to caPEM at now, may be
// used by a server and by a client (Redis nodes use it as both), has no key weaker than RSA
// 2048 or ECDSA P-256 in its chain, and, when serverName is not empty, names it. The error says what does not match, in words a person can act on.
func Check(caPEM []byte, server Pair, serverName string, now time.Time) error {
	roots, err := Pool(caPEM)
	if err != nil {
		return err
	}
	if _, err := tls.X509KeyPair(server.Cert, server.Key); err != nil {
		return fmt.Errorf("tls.key does not belong to tls.crt (or either is not PEM): %w", err)
	}
	cert, err := ParseCert(server.Cert)
	if err != nil {
		return fmt.Errorf("tls.crt: %w", err)
	}
	var chain []*x509.Certificate
	for _, usage := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
		opts := x509.VerifyOptions{Roots: roots, CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{usage}, Intermediates: intermediates(server.Cert)}
		chains, err := cert.Verify(opts)
		if err != nil {
			return fmt.Errorf("tls.crt does not verify against ca.crt for %s: %w", usageName(usage), err)
		}
		chain = chains[0]
	}
	for i, c := range chain {
		if weak := weakKey(c); weak != "" {
			which := "tls.crt"
			if i > 0 {
				which = fmt.Sprintf("the CA certificate %q of its chain", c.Subject.CommonName)
			}
			return fmt.Errorf("%s has %s: re-issue it with an RSA key of at least %d bits or an ECDSA key on P-256 or a larger curve", which, weak, MinRSABits)
		}
	}
	if serverName != "" {
		if err := cert.VerifyHostname(serverName); err != nil {
			return fmt.Errorf("tls.crt does not name %s: %w", serverName, err)
		}
	}
	return nil
}

// MinRSABits is the smallest RSA key Check accepts in a certificate or its chain (112 bits
// of security, NIST SP 800-57); an ECDSA key needs P-256 or a larger curve.
const MinRSABits = 2048

// weakKey says what is too weak about c's public key ("an RSA key of 1024 bits"), or "" when
// nothing is: RSA under MinRSABits, ECDSA under P-256, or a kind of key TLS in Redis does not
// take.
func weakKey(c *x509.Certificate) string {
	switch k := c.PublicKey.(type) {
	case *rsa.PublicKey:
		if bits := k.N.BitLen(); bits < MinRSABits {
			return fmt.Sprintf("an RSA key of %d bits", bits)
		}
	case *ecdsa.PublicKey:
		if k.Curve.Params().BitSize < 256 {
			return "an ECDSA key on " + k.Curve.Params().Name
		}
	case ed25519.PublicKey:
	default:
		return fmt.Sprintf("a key of type %T", k)
	}
	return ""
}

func usageName(u x509.ExtKeyUsage) string {
	if u == x509.ExtKeyUsageClientAuth {
		return "client authentication (Redis nodes present it to each other on the cluster bus)"
	}
	return "server authentication"
}

// Pool is a certificate pool of every certificate in caPEM.
func Pool(caPEM []byte) (*x509.CertPool, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, errors.New("ca.crt holds no PEM certificate")
	}
	return pool, nil
}

// ParseCert parses the first certificate of a PEM block sequence.
func ParseCert(certPEM []byte) (*x509.Certificate, error) {
	for rest := certPEM; ; {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			return nil, errors.New("no PEM certificate")
		}
		if block.Type == "CERTIFICATE" {
			return x509.ParseCertificate(block.Bytes)
		}
	}
}

// intermediates are the certificates after the first in a chain file.
func intermediates(chainPEM []byte) *x509.CertPool {
	pool := x509.NewCertPool()
	first := true
	for rest := chainPEM; ; {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			return pool
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		if !first {
			if c, err := x509.ParseCertificate(block.Bytes); err == nil {
				pool.AddCert(c)
			}
		}
		first = false
	}
}

func template(commonName string, now time.Time, validity time.Duration) (*x509.Certificate, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("while drawing a serial number: %w", err)
	}
	return &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: commonName, Organization: []string{"middleware-operator"}},
		NotBefore:    now.Add(-backdate).UTC(),
		NotAfter:     now.Add(validity).UTC(),
	}, nil
}

func encode(der []byte, key *ecdsa.PrivateKey) (Pair, error) {
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return Pair{}, fmt.Errorf("while encoding the key: %w", err)
	}
	return Pair{
		Cert: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		Key:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
	}, nil
}

func parsePair(p Pair) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	kp, err := tls.X509KeyPair(p.Cert, p.Key)
	if err != nil {
		return nil, nil, err
	}
	key, ok := kp.PrivateKey.(*ecdsa.PrivateKey)
	if !ok {
		return nil, nil, errors.New("the key is not an ECDSA key")
	}
	cert, err := x509.ParseCertificate(kp.Certificate[0])
	if err != nil {
		return nil, nil, err
	}
	return cert, key, nil
}

// UnnamedHosts are the hosts cert does not name (all of them when it is nil): a client
// outside that dials one of them and verifies the host refuses it.
func UnnamedHosts(cert *x509.Certificate, hosts []string) []string {
	var out []string
	for _, host := range hosts {
		if cert == nil || cert.VerifyHostname(host) != nil {
			out = append(out, host)
		}
	}
	return out
}
