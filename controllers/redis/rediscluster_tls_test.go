package redis_test

import (
	"context"
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
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
	"github.com/middleware-operator/middleware-operator/internal/certs"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/execute"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/report"
	"github.com/middleware-operator/middleware-operator/tests/redistest"
	"github.com/middleware-operator/middleware-operator/tests/testenv"
)

// TestRedisClusterTLS forms a cluster with spec.tls on and a generated certificate, writes
// to it over TLS while it scales out from 3 to 4 masters (slots move by MIGRATE between the
// nodes, over TLS as they run tls-cluster yes), and reads every acknowledged key back
// through every node. Plain text is refused, on the client port and on the cluster bus. A
// certificate due for renewal is replaced and loaded without a restart; then an upgrade
// replaces every pod over TLS with a TLS writer running, and no key is lost.
func TestRedisClusterTLS(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	rc := redistest.NewCluster(ns, "secure", 6)
	rc.Spec.TLS = &redisv1alpha1.TLSSpec{Enabled: true}
	key, rc, pw := createRunning(t, rc, "over TLS")

	cond := meta.FindStatusCondition(rc.Status.Conditions, report.ConditionTLS)
	if cond == nil || cond.Status != metav1.ConditionTrue || cond.Reason != report.ReasonTLSGenerated {
		t.Errorf("TLS condition %+v, want True Generated", cond)
	}
	secret := &corev1.Secret{}
	if err := env.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "secure-tls"}, secret); err != nil {
		t.Fatal(err)
	}
	serverName := "secure-client." + ns + ".svc"
	pair := certs.Pair{Cert: secret.Data["tls.crt"], Key: secret.Data["tls.key"]}
	if err := certs.Check(secret.Data["ca.crt"], pair, serverName, time.Now()); err != nil {
		t.Fatalf("the generated certificate: %v", err)
	}
	pool, err := certs.Pool(secret.Data["ca.crt"])
	if err != nil {
		t.Fatal(err)
	}
	tlsConfig := &tls.Config{RootCAs: pool, ServerName: serverName, MinVersion: tls.VersionTLS12}

	keyPair, err := tls.X509KeyPair(pair.Cert, pair.Key)
	if err != nil {
		t.Fatal(err)
	}
	withCert := tlsConfig.Clone()
	withCert.Certificates = []tls.Certificate{keyPair}
	admin := execute.NewAdmin(pw, 2*time.Second).WithTLS(tlsConfig)
	defer func() { _ = admin.Close() }()
	caFile := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(caFile, secret.Data["ca.crt"], 0o600); err != nil {
		t.Fatal(err)
	}
	for _, n := range rc.Status.Nodes {
		// Over TLS, verified against the CA, the node runs TLS only.
		c := goredis.NewClient(&goredis.Options{Addr: n.Instance, Password: pw, TLSConfig: tlsConfig})
		conf, err := c.ConfigGet(t.Context(), "*").Result()
		_ = c.Close()
		if err != nil {
			t.Fatalf("%s over TLS: %v", n.Name, err)
		}
		for k, want := range map[string]string{"port": "0", "tls-port": "6379", "tls-cluster": "yes", "tls-replication": "yes", "tls-auth-clients": "optional"} {
			if conf[k] != want {
				t.Errorf("%s: %s is %q, want %q", n.Name, k, conf[k], want)
			}
		}
		// Plain text is refused on the client port...
		plain := goredis.NewClient(&goredis.Options{Addr: n.Instance, Password: pw, MaxRetries: -1, DialTimeout: time.Second, ReadTimeout: time.Second})
		if err := plain.Ping(t.Context()).Err(); err == nil {
			t.Errorf("%s answers PING in plain text", n.Name)
		}
		_ = plain.Close()
		// ... a client that trusts another CA is refused by its own TLS ...
		other, _ := certs.NewCA("other", time.Now(), time.Hour)
		otherPool, _ := certs.Pool(other.Cert)
		foreign := goredis.NewClient(&goredis.Options{Addr: n.Instance, Password: pw, MaxRetries: -1, TLSConfig: &tls.Config{RootCAs: otherPool, ServerName: serverName, MinVersion: tls.VersionTLS12}})
		if err := foreign.Ping(t.Context()).Err(); err == nil || !strings.Contains(err.Error(), "certificate") {
			t.Errorf("%s: a client trusting another CA got %v, want a certificate error", n.Name, err)
		}
		_ = foreign.Close()
		// ... and the cluster bus takes only TLS with a certificate of the cluster's CA.
		bus := strings.TrimSuffix(n.Instance, ":6379") + ":16379"
		if err := busRead(bus, tlsConfig); err == nil || !strings.Contains(err.Error(), "certificate required") {
			t.Errorf("%s: the cluster bus, to a TLS client without a certificate: %v, want certificate required", n.Name, err)
		}
		if err := busRead(bus, withCert); !isTimeout(err) {
			t.Errorf("%s: the cluster bus, to a TLS client with the cluster's certificate: %v, want it to wait for a message", n.Name, err)
		}
		// redis-cli, as the readiness probe runs it, verifies the node with the CA file.
		cmd := exec.CommandContext(t.Context(), "redis-cli", "--tls", "--cacert", caFile, "-h", strings.TrimSuffix(n.Instance, ":6379"), "-p", "6379", "cluster", "info")
		cmd.Env = append(os.Environ(), "REDISCLI_AUTH="+pw)
		if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "cluster_state:ok") {
			t.Errorf("%s: redis-cli --tls: %v\n%s", n.Name, err, out)
		}
	}
	myself(t, admin, rc.Status.Nodes[0].Instance)

	w := redistest.StartTLSWriter(rc.Status.Nodes[0].Instance, pw, tlsConfig)
	w.WaitWritten(t, 300)
	rc = scaleOutToFourMasters(t, key, "over TLS")
	time.Sleep(time.Second)
	w.Verify(t, env.Client, rc, pw)

	// A certificate due for renewal (two thirds through its life) is replaced by a fresh
	// one of the same CA, and every running node loads it without a restart.
	caSecret := &corev1.Secret{}
	if err := env.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "secure-tls-ca"}, caSecret); err != nil {
		t.Fatal(err)
	}
	ca := certs.Pair{Cert: caSecret.Data["tls.crt"], Key: caSecret.Data["tls.key"]}
	due, err := certs.NewServer(ca, []string{serverName}, nil, time.Now().Add(-50*time.Minute), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	secret.Data["tls.crt"], secret.Data["tls.key"] = due.Cert, due.Key
	renewStart := time.Now()
	if err := env.Client.Update(t.Context(), secret); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 2*time.Minute, func(ctx context.Context) (bool, string) {
		cur := &corev1.Secret{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(secret), cur); err != nil {
			return false, err.Error()
		}
		cert, err := certs.ParseCert(cur.Data["tls.crt"])
		if err != nil {
			return false, err.Error()
		}
		if time.Until(cert.NotAfter) < 300*24*time.Hour {
			return false, "the certificate expires at " + cert.NotAfter.String()
		}
		return everyNodeServes(ctx, rc.Status.Nodes, tlsConfig, cert.Raw, "the renewed certificate")
	})
	t.Logf("a certificate due for renewal was replaced and served by all %d nodes in %.1f s", len(rc.Status.Nodes), time.Since(renewStart).Seconds())
	waitEvent(t, ns, report.ReasonTLSRenewed, "secure-tls")
	waitEvent(t, ns, report.ReasonTLSReloaded, "secure-tls")
	redistest.WaitShape(t, env.Client, key, 4, 8)

	// An upgrade replaces every pod, one at a time, masters failing over first over the
	// TLS bus, while a writer over TLS runs.
	w = redistest.StartTLSWriter(rc.Status.Nodes[0].Instance, pw, tlsConfig)
	w.WaitWritten(t, 300)
	upgradeVersion(t, key, "7.2.4", 8)
	rc = redistest.WaitShape(t, env.Client, key, 4, 8)
	time.Sleep(time.Second)
	_, outage := w.Stop()
	t.Logf("longest time a write over TLS failed or blocked during the upgrade: %s", outage)
	w.Verify(t, env.Client, rc, pw)
}

// TestRedisClusterTLSRequiresClientCertificates: with spec.tls.requireClientCertificates
// every node refuses a client that trusts the CA but presents no certificate, while the
// operator (which forms the cluster and calls it Ready), the readiness probe's redis-cli and
// a client with a certificate of the cluster's CA get in; the writer's keys all read back
// through every node and on the replicas.
func TestRedisClusterTLSRequiresClientCertificates(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	rc := redistest.NewCluster(ns, "mtls", 6)
	rc.Spec.TLS = &redisv1alpha1.TLSSpec{Enabled: true, RequireClientCertificates: true}
	_, rc, pw := createRunning(t, rc, "requiring client certificates")

	secret := &corev1.Secret{}
	if err := env.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "mtls-tls"}, secret); err != nil {
		t.Fatal(err)
	}
	pool, err := certs.Pool(secret.Data["ca.crt"])
	if err != nil {
		t.Fatal(err)
	}
	caOnly := &tls.Config{RootCAs: pool, ServerName: "mtls-client." + ns + ".svc", MinVersion: tls.VersionTLS12}
	keyPair, err := tls.X509KeyPair(secret.Data["tls.crt"], secret.Data["tls.key"])
	if err != nil {
		t.Fatal(err)
	}
	withCert := caOnly.Clone()
	withCert.Certificates = []tls.Certificate{keyPair}
	dir := t.TempDir()
	for _, f := range []string{"ca.crt", "tls.crt", "tls.key"} {
		if err := os.WriteFile(filepath.Join(dir, f), secret.Data[f], 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range rc.Status.Nodes {
		c := goredis.NewClient(&goredis.Options{Addr: n.Instance, Password: pw, MaxRetries: -1, TLSConfig: withCert})
		conf, err := c.ConfigGet(t.Context(), "tls-auth-clients").Result()
		_ = c.Close()
		if err != nil || conf["tls-auth-clients"] != "yes" {
			t.Errorf("%s with the cluster's certificate: tls-auth-clients %q (%v), want yes", n.Name, conf["tls-auth-clients"], err)
		}
		bare := goredis.NewClient(&goredis.Options{Addr: n.Instance, Password: pw, MaxRetries: -1, TLSConfig: caOnly, DialTimeout: 2 * time.Second, ReadTimeout: 2 * time.Second})
		if err := bare.Ping(t.Context()).Err(); err == nil {
			t.Errorf("%s answers a client without a certificate", n.Name)
		}
		_ = bare.Close()
		host := strings.TrimSuffix(n.Instance, ":6379")
		for _, tc := range []struct {
			args []string
			ok   bool
		}{
			{[]string{"--tls", "--cacert", dir + "/ca.crt", "--cert", dir + "/tls.crt", "--key", dir + "/tls.key"}, true}, // as the readiness probe runs it
			{[]string{"--tls", "--cacert", dir + "/ca.crt"}, false},
		} {
			cmd := exec.CommandContext(t.Context(), "redis-cli", append(tc.args, "-h", host, "-p", "6379", "cluster", "info")...)
			cmd.Env = append(os.Environ(), "REDISCLI_AUTH="+pw)
			out, _ := cmd.CombinedOutput()
			if ok := strings.Contains(string(out), "cluster_state:ok"); ok != tc.ok {
				t.Errorf("%s: redis-cli %s answered %q, want cluster_state:ok: %v", n.Name, strings.Join(tc.args, " "), out, tc.ok)
			}
		}
	}
	w := redistest.StartTLSWriter(rc.Status.Nodes[0].Instance, pw, withCert)
	w.WaitWritten(t, 300)
	time.Sleep(time.Second)
	w.Verify(t, env.Client, rc, pw)
}

// busRead opens a TLS connection to a cluster bus address with cfg and reads for a second:
// the error says whether the node refused the handshake or waits for a message.
func busRead(addr string, cfg *tls.Config) error {
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: time.Second}, "tcp", addr, cfg)
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close() }()
	_ = conn.SetDeadline(time.Now().Add(time.Second))
	_, err = conn.Read(make([]byte, 1))
	return err
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// TestRedisClusterTLSBadSecret: a missing user Secret, then one whose certificate does not
// name the client Service, then one whose certificate has a 1024-bit RSA key, are reported
// in the TLS condition and a Warning event that say what to fix; no pod is created meanwhile.
func TestRedisClusterTLSBadSecret(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	rc := redistest.NewCluster(ns, "mtls", 6)
	rc.Spec.TLS = &redisv1alpha1.TLSSpec{Enabled: true, SecretName: "mtls-cert"}
	if err := env.Client.Create(t.Context(), rc); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(rc)
	waitTLSCondition(t, key, `Secret "mtls-cert" not found`)
	waitEvent(t, ns, report.ReasonTLSInvalid, `Secret "mtls-cert" not found`)

	now := time.Now()
	ca, err := certs.NewCA("user ca", now, certs.CAValidity)
	if err != nil {
		t.Fatal(err)
	}
	wrong, err := certs.NewServer(ca, []string{"elsewhere.example"}, nil, now, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "mtls-cert", Namespace: ns},
		Type:       corev1.SecretTypeTLS,
		Data:       map[string][]byte{"ca.crt": ca.Cert, "tls.crt": wrong.Cert, "tls.key": wrong.Key},
	}
	if err := env.Client.Create(t.Context(), secret); err != nil {
		t.Fatal(err)
	}
	waitTLSCondition(t, key, "tls.crt does not name mtls-client."+ns+".svc")
	waitEvent(t, ns, report.ReasonTLSInvalid, "does not name")

	before := secret.DeepCopy() // the operator has labelled it since: a merge patch keeps that
	secret.Data["tls.crt"], secret.Data["tls.key"] = rsaCertificate(t, ca, 1024, "mtls-client."+ns+".svc", now)
	if err := env.Client.Patch(t.Context(), secret, client.MergeFrom(before)); err != nil {
		t.Fatal(err)
	}
	waitTLSCondition(t, key, "tls.crt has an RSA key of 1024 bits: re-issue it with an RSA key of at least 2048 bits")
	waitEvent(t, ns, report.ReasonTLSInvalid, "RSA key of 1024 bits")
	pods := &corev1.PodList{}
	if err := env.Client.List(t.Context(), pods, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) != 0 {
		t.Errorf("%d pods exist with an invalid certificate", len(pods.Items))
	}
}

// rsaCertificate is a certificate for name with an RSA key of bits, signed by ca, for server
// and client authentication, and its key (PEM).
func rsaCertificate(t *testing.T, ca certs.Pair, bits int, name string, now time.Time) (certPEM, keyPEM []byte) {
	t.Helper()
	caPair, err := tls.X509KeyPair(ca.Cert, ca.Key)
	if err != nil {
		t.Fatal(err)
	}
	caCert, err := x509.ParseCertificate(caPair.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	key, err := rsa.GenerateKey(rand.Reader, bits)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(now.UnixNano()), Subject: pkix.Name{CommonName: name}, DNSNames: []string{name},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour), KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caPair.PrivateKey)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
}

func waitTLSCondition(t *testing.T, key client.ObjectKey, says string) {
	t.Helper()
	testenv.Eventually(t, time.Minute, func(ctx context.Context) (bool, string) {
		rc := &redisv1alpha1.RedisCluster{}
		if err := env.Client.Get(ctx, key, rc); err != nil {
			return false, err.Error()
		}
		c := meta.FindStatusCondition(rc.Status.Conditions, report.ConditionTLS)
		if c == nil {
			return false, "no TLS condition"
		}
		return c.Status == metav1.ConditionFalse && c.Reason == report.ReasonTLSInvalid && strings.Contains(c.Message, says), c.Reason + ": " + c.Message
	})
}

// everyNodeServes reports, for an Eventually, whether every node serves the certificate of
// DER bytes raw and verifies with cfg; what names the certificate in the message.
func everyNodeServes(ctx context.Context, nodes []redisv1alpha1.RedisNode, cfg *tls.Config, raw []byte, what string) (bool, string) {
	for _, n := range nodes {
		if ok, err := execute.ServesCertificate(ctx, n.Instance, cfg, raw); err != nil || !ok {
			return false, fmt.Sprintf("%s does not serve %s yet (%v)", n.Name, what, err)
		}
	}
	return true, ""
}

// waitEvent waits for an event of reason whose message has says (a Warning, unless the
// reason is a Normal one of TLS).
func waitEvent(t *testing.T, ns, reason, says string) {
	t.Helper()
	want := corev1.EventTypeWarning
	switch reason {
	case report.ReasonTLSRenewed, report.ReasonTLSReloaded, report.ReasonCARotationStarted,
		report.ReasonCARotationSwitched, report.ReasonCARotationCompleted:
		want = corev1.EventTypeNormal
	}
	testenv.Eventually(t, time.Minute, func(ctx context.Context) (bool, string) {
		evs := &corev1.EventList{}
		if err := env.Client.List(ctx, evs, client.InNamespace(ns)); err != nil {
			return false, err.Error()
		}
		for _, e := range evs.Items {
			if e.Reason == reason && e.Type == want && strings.Contains(e.Message, says) {
				return true, ""
			}
		}
		return false, "no such event"
	})
}
