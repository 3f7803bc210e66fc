package certs

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"net"
	"os"
	"strings"
	"testing"
	"time"
)

var now = time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)

func mustCA(t *testing.T) Pair {
	t.Helper()
	ca, err := NewCA("test-ca", now, CAValidity)
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

func TestServerCertificate(t *testing.T) {
	ca := mustCA(t)
	names := []string{"cache-client.ns.svc", "*.cache.ns.svc", "*.cache.ns.svc.cluster.local", "localhost"}
	server, err := NewServer(ca, names, []net.IP{net.ParseIP("127.0.0.1")}, now, ServerValidity)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := ParseCert(server.Cert)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(cert.DNSNames, ",") != strings.Join(names, ",") || len(cert.IPAddresses) != 1 || !cert.IPAddresses[0].Equal(net.ParseIP("127.0.0.1")) {
		t.Errorf("SANs = %v %v, want %v 127.0.0.1", cert.DNSNames, cert.IPAddresses, names)
	}
	if got := cert.NotAfter.Sub(now); got != ServerValidity {
		t.Errorf("expires %v after now, want %v", got, ServerValidity)
	}
	if cert.NotBefore.After(now) {
		t.Errorf("NotBefore %v is after now", cert.NotBefore)
	}
	if cert.IsCA {
		t.Error("the server certificate is a CA")
	}
	if cert.PublicKeyAlgorithm != x509.ECDSA {
		t.Errorf("key algorithm %v, want ECDSA", cert.PublicKeyAlgorithm)
	}
	for name, tc := range map[string]struct {
		host string
		ok   bool
	}{
		"client service":        {"cache-client.ns.svc", true},
		"pod through headless":  {"cache-0.cache.ns.svc", true},
		"pod, full domain":      {"cache-3.cache.ns.svc.cluster.local", true},
		"localhost":             {"localhost", true},
		"loopback IP":           {"127.0.0.1", true},
		"another cluster's pod": {"other-0.other.ns.svc", false},
		"two labels deep":       {"a.b.cache.ns.svc", false},
		"a pod IP":              {"127.1.0.5", false},
	} {
		t.Run(name, func(t *testing.T) {
			err := Check(ca.Cert, server, tc.host, now)
			if (err == nil) != tc.ok {
				t.Errorf("Check(%s) = %v, want ok=%v", tc.host, err, tc.ok)
			}
		})
	}
}

func TestServerCertificateNeverOutlivesItsCA(t *testing.T) {
	ca, err := NewCA("short", now, 30*24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	server, err := NewServer(ca, []string{"a"}, nil, now, ServerValidity)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := ParseCert(ca.Cert)
	cert, _ := ParseCert(server.Cert)
	if !cert.NotAfter.Equal(caCert.NotAfter) {
		t.Errorf("server expires %v, CA %v: want the CA's", cert.NotAfter, caCert.NotAfter)
	}
}

func TestRenewal(t *testing.T) {
	ca := mustCA(t)
	server, err := NewServer(ca, []string{"a"}, nil, now, 300*24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	at, err := RenewAt(server.Cert)
	if err != nil {
		t.Fatal(err)
	}
	// Lifetime 300 days plus the 5 minute backdate: renewal two thirds in, about day 200.
	if want := now.Add(200 * 24 * time.Hour); at.Sub(want).Abs() > 5*time.Minute {
		t.Errorf("RenewAt = %v, want about %v", at, want)
	}
	for name, tc := range map[string]struct {
		at   time.Time
		cert []byte
		want bool
	}{
		"fresh":                {now, server.Cert, false},
		"day 199":              {now.Add(199 * 24 * time.Hour), server.Cert, false},
		"day 201":              {now.Add(201 * 24 * time.Hour), server.Cert, true},
		"expired":              {now.Add(400 * 24 * time.Hour), server.Cert, true},
		"unreadable":           {now, []byte("garbage"), true},
		"empty (not made yet)": {now, nil, true},
	} {
		t.Run(name, func(t *testing.T) {
			if got := NeedsRenewal(tc.cert, tc.at); got != tc.want {
				t.Errorf("NeedsRenewal = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestCheckRejects(t *testing.T) {
	ca, other := mustCA(t), mustCA(t)
	server, err := NewServer(ca, []string{"svc"}, nil, now, ServerValidity)
	if err != nil {
		t.Fatal(err)
	}
	foreign, err := NewServer(other, []string{"svc"}, nil, now, ServerValidity)
	if err != nil {
		t.Fatal(err)
	}
	caOnly := Pair{Cert: ca.Cert, Key: ca.Key} // a valid pair, but it names nothing
	for name, tc := range map[string]struct {
		ca     []byte
		server Pair
		at     time.Time
		want   string
	}{
		"another CA's certificate": {ca.Cert, foreign, now, "does not verify against ca.crt"},
		"key of another pair":      {ca.Cert, Pair{Cert: server.Cert, Key: foreign.Key}, now, "tls.key does not belong to tls.crt"},
		"expired":                  {ca.Cert, server, now.Add(2 * ServerValidity), "does not verify against ca.crt"},
		"no CA":                    {nil, server, now, "ca.crt holds no PEM certificate"},
		"not PEM":                  {ca.Cert, Pair{Cert: []byte("x"), Key: []byte("y")}, now, "tls.key does not belong"},
		"wrong name":               {ca.Cert, server, now, ""},
		"the CA itself as server":  {ca.Cert, caOnly, now, "tls.crt does not name"},
	} {
		t.Run(name, func(t *testing.T) {
			host := "svc"
			if name == "wrong name" || name == "the CA itself as server" {
				host = "elsewhere"
			}
			err := Check(tc.ca, tc.server, host, tc.at)
			if err == nil {
				t.Fatal("Check accepted it")
			}
			if tc.want != "" && !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Check = %v, want it to say %q", err, tc.want)
			}
		})
	}
	if err := Check(ca.Cert, server, "svc", now); err != nil {
		t.Errorf("Check of a good pair = %v", err)
	}
}

// TestCheckRejectsWeakKeys: a certificate, or a CA of its chain, with an RSA key under
// 2048 bits or an ECDSA key under P-256 is refused, naming the key and the fix; RSA 2048
// and P-384 pass.
func TestCheckRejectsWeakKeys(t *testing.T) {
	rsaKey := func(bits int) crypto.Signer {
		k, err := rsa.GenerateKey(rand.Reader, bits)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	ecKey := func(c elliptic.Curve) crypto.Signer {
		k, err := ecdsa.GenerateKey(c, rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	for name, tc := range map[string]struct {
		caKey, leafKey crypto.Signer
		want           string // "" when Check must accept it
	}{
		"RSA 1024 leaf":      {ecKey(elliptic.P256()), rsaKey(1024), "tls.crt has an RSA key of 1024 bits"},
		"P-224 leaf":         {ecKey(elliptic.P256()), ecKey(elliptic.P224()), "tls.crt has an ECDSA key on P-224"},
		"RSA 1024 CA":        {rsaKey(1024), ecKey(elliptic.P256()), `the CA certificate "weak-test-ca" of its chain has an RSA key of 1024 bits`},
		"RSA 2048 leaf":      {ecKey(elliptic.P256()), rsaKey(2048), ""},
		"P-384 leaf, RSA CA": {rsaKey(2048), ecKey(elliptic.P384()), ""},
	} {
		t.Run(name, func(t *testing.T) {
			caPEM, leaf := signedPair(t, tc.caKey, tc.leafKey)
			err := Check(caPEM, leaf, "svc", now)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("Check refused it: %v", err)
			case tc.want == "":
			case err == nil:
				t.Fatal("Check accepted it")
			case !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "re-issue it with an RSA key of at least 2048 bits"):
				t.Errorf("Check = %v, want it to say %q and how to fix it", err, tc.want)
			}
		})
	}
}

// signedPair is a CA certificate of caKey (PEM) and a certificate for "svc" of leafKey it
// signs, for server and client authentication.
func signedPair(t *testing.T, caKey, leafKey crypto.Signer) ([]byte, Pair) {
	t.Helper()
	caTmpl, err := template("weak-test-ca", now, CAValidity)
	if err != nil {
		t.Fatal(err)
	}
	caTmpl.IsCA, caTmpl.BasicConstraintsValid, caTmpl.KeyUsage = true, true, x509.KeyUsageCertSign
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, caKey.Public(), caKey)
	if err != nil {
		t.Fatal(err)
	}
	leafTmpl, err := template("svc", now, ServerValidity)
	if err != nil {
		t.Fatal(err)
	}
	leafTmpl.DNSNames, leafTmpl.KeyUsage = []string{"svc"}, x509.KeyUsageDigitalSignature|x509.KeyUsageKeyEncipherment
	leafTmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	leafDER, err := x509.CreateCertificate(rand.Reader, leafTmpl, caTmpl, leafKey.Public(), caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(leafKey)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), Pair{
		Cert: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: leafDER}),
		Key:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
	}
}

func TestNewLoopback(t *testing.T) {
	dir := t.TempDir() + "/tls"
	l, err := NewLoopback(dir, "loopback-ca", now)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"localhost", "127.0.0.1"} {
		if err := Check(l.CA.Cert, l.Server, name, now); err != nil {
			t.Errorf("the certificate for %s: %v", name, err)
		}
	}
	for path, want := range map[string][]byte{l.CAFile: l.CA.Cert, l.CertFile: l.Server.Cert, l.KeyFile: l.Server.Key} {
		if got, err := os.ReadFile(path); err != nil || string(got) != string(want) {
			t.Errorf("%s holds %d bytes (err %v), want the %d of its PEM", path, len(got), err, len(want))
		}
	}
}
