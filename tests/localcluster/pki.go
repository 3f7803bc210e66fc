package localcluster

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// keyPair is a certificate with its private key.
type keyPair struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

// pki holds the paths of every certificate and key the control plane uses.
type pki struct {
	CACert, CAKey                   string
	ServingCert, ServingKey         string
	FrontProxyCA                    string
	FrontProxyClient, FrontProxyKey string
	SAPublic, SAPrivate             string
	caPEM                           []byte
}

// newPKI writes a cluster CA, an API server serving certificate, a front-proxy CA with its
// client certificate, and a service-account signing key pair into dir.
func newPKI(dir string) (*pki, error) {
	p := &pki{}
	ca, err := newCA("middleware-operator-local-ca")
	if err != nil {
		return nil, err
	}
	serving, err := ca.issue(pkix.Name{CommonName: "kube-apiserver"}, x509.ExtKeyUsageServerAuth,
		[]string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"},
		[]net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("10.0.0.1")})
	if err != nil {
		return nil, err
	}
	frontCA, err := newCA("front-proxy-ca")
	if err != nil {
		return nil, err
	}
	frontClient, err := frontCA.issue(pkix.Name{CommonName: "front-proxy-client"}, x509.ExtKeyUsageClientAuth, nil, nil)
	if err != nil {
		return nil, err
	}
	saKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	write := func(name string, pair *keyPair) (string, string, error) {
		certPath, keyPath := filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
		if err := writePEM(certPath, "CERTIFICATE", pair.cert.Raw); err != nil {
			return "", "", err
		}
		der, err := x509.MarshalECPrivateKey(pair.key)
		if err != nil {
			return "", "", err
		}
		return certPath, keyPath, writePEM(keyPath, "EC PRIVATE KEY", der)
	}
	if p.CACert, p.CAKey, err = write("ca", ca); err != nil {
		return nil, err
	}
	if p.ServingCert, p.ServingKey, err = write("apiserver", serving); err != nil {
		return nil, err
	}
	if p.FrontProxyCA, _, err = write("front-proxy-ca", frontCA); err != nil {
		return nil, err
	}
	if p.FrontProxyClient, p.FrontProxyKey, err = write("front-proxy-client", frontClient); err != nil {
		return nil, err
	}
	p.SAPrivate, p.SAPublic = filepath.Join(dir, "sa.key"), filepath.Join(dir, "sa.pub")
	der, err := x509.MarshalECPrivateKey(saKey)
	if err != nil {
		return nil, err
	}
	if err := writePEM(p.SAPrivate, "EC PRIVATE KEY", der); err != nil {
		return nil, err
	}
	pub, err := x509.MarshalPKIXPublicKey(&saKey.PublicKey)
	if err != nil {
		return nil, err
	}
	if err := writePEM(p.SAPublic, "PUBLIC KEY", pub); err != nil {
		return nil, err
	}
	p.caPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.cert.Raw})
	return p, nil
}

func newCA(name string) (*keyPair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(10 * 365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("while creating CA %s: %w", name, err)
	}
	cert, err := x509.ParseCertificate(der)
	return &keyPair{cert: cert, key: key}, err
}

func (ca *keyPair) issue(subject pkix.Name, usage x509.ExtKeyUsage, dns []string, ips []net.IP) (*keyPair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      subject,
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(10 * 365 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{usage},
		DNSNames:     dns,
		IPAddresses:  ips,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return nil, fmt.Errorf("while issuing certificate %s: %w", subject.CommonName, err)
	}
	cert, err := x509.ParseCertificate(der)
	return &keyPair{cert: cert, key: key}, err
}

func writePEM(path, kind string, der []byte) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600)
}
