package resources_test

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
	"github.com/middleware-operator/middleware-operator/internal/certs"
	"github.com/middleware-operator/middleware-operator/internal/resources"
	"github.com/middleware-operator/middleware-operator/tests/testenv"
)

// trustNode is one redis-server running a TLS cluster's generated redis.conf with the
// certificate of a cluster's own generated CA.
type trustNode struct {
	client, bus string     // host:port of the client port and the cluster bus
	ca, node    certs.Pair // the cluster's CA and the node's certificate
}

// startTrustNode starts a node of a TLS RedisCluster (clientAuth: spec.tls.requireClientCertificates)
// whose CA is made for it alone, as the operator generates one per cluster.
func startTrustNode(t *testing.T, name string, requireClientCerts bool) trustNode {
	t.Helper()
	real := redisServerBinary(t)
	now := time.Now()
	ca, err := certs.NewCA(name+" CA", now, certs.CAValidity)
	if err != nil {
		t.Fatal(err)
	}
	node, err := certs.NewServer(ca, []string{"localhost"}, []net.IP{net.ParseIP("127.0.0.1")}, now, certs.ServerValidity)
	if err != nil {
		t.Fatal(err)
	}
	dir, ports := t.TempDir(), testenv.FreePorts(t, 2)
	for file, data := range map[string][]byte{resources.RedisTLSCAKey: ca.Cert, resources.RedisTLSCertKey: node.Cert, resources.RedisTLSKeyKey: node.Key} {
		if err := os.WriteFile(filepath.Join(dir, file), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	rc := redisCluster(nil)
	rc.Name = name
	rc.Spec.TLS = &redisv1alpha1.TLSSpec{Enabled: true, RequireClientCertificates: requireClientCerts}
	conf := resources.RedisConfigMap(rc, "").Data[resources.RedisConfigFile]
	for from, to := range map[string]string{
		"\ntls-port 6379\n":         "\ntls-port " + strconv.Itoa(ports[0]) + "\ncluster-port " + strconv.Itoa(ports[1]) + "\n",
		"\nbind 0.0.0.0\n":          "\nbind 127.0.0.1\n",
		"\ndir /data\n":             "\ndir " + dir + "\n",
		resources.RedisTLSDir + "/": dir + "/",
	} {
		if !strings.Contains(conf, from) {
			t.Fatalf("the generated redis.conf has no %q:\n%s", from, conf)
		}
		conf = strings.ReplaceAll(conf, from, to)
	}
	if err := os.WriteFile(filepath.Join(dir, "redis.conf"), []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(real, filepath.Join(dir, "redis.conf"))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	n := trustNode{client: "127.0.0.1:" + strconv.Itoa(ports[0]), bus: "127.0.0.1:" + strconv.Itoa(ports[1]), ca: ca, node: node}
	c := goredis.NewClient(&goredis.Options{Addr: n.client, TLSConfig: n.tlsPresenting(t, node), MaxRetries: -1, DisableIdentity: true, Protocol: 2})
	t.Cleanup(func() { _ = c.Close() })
	testenv.Eventually(t, 10*time.Second, func(ctx context.Context) (bool, string) {
		err := c.Ping(ctx).Err()
		return err == nil, fmt.Sprintf("%s does not answer its own certificate: %v", name, err)
	})
	return n
}

// tlsPresenting trusts n's CA and presents cert (none when cert is empty).
func (n trustNode) tlsPresenting(t *testing.T, cert certs.Pair) *tls.Config {
	t.Helper()
	pool, err := certs.Pool(n.ca.Cert)
	if err != nil {
		t.Fatal(err)
	}
	cfg := &tls.Config{RootCAs: pool, ServerName: "localhost", MinVersion: tls.VersionTLS12}
	if len(cert.Cert) > 0 {
		pair, err := tls.X509KeyPair(cert.Cert, cert.Key)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg
}

// busAccepts dials n's cluster bus presenting cert and reports whether the node kept the
// connection: with TLS 1.3 a refused client certificate shows as an alert on the first
// read, while an accepted peer gets silence (the bus waits for a packet) until the deadline.
func (n trustNode) busAccepts(t *testing.T, cert certs.Pair) (bool, error) {
	t.Helper()
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", n.bus, n.tlsPresenting(t, cert))
	if err != nil {
		return false, err
	}
	defer func() { _ = conn.Close() }()
	_ = conn.SetReadDeadline(time.Now().Add(time.Second))
	_, err = conn.Read(make([]byte, 1))
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return true, nil
	}
	return false, err
}

// TestOneClustersCertificatesAreRefusedByAnother: the operator generates a CA per
// RedisCluster, so a node certificate of cluster A (or an application certificate signed by
// A's CA) opens nothing on cluster B: B's client port refuses it (whether B requires client
// certificates or not: a certificate a client presents must verify), and B's cluster bus
// refuses it, so A's holder cannot join B's cluster. B's own certificate is accepted on both,
// the control that the refusals are about the certificate.
func TestOneClustersCertificatesAreRefusedByAnother(t *testing.T) {
	t.Parallel()
	a := startTrustNode(t, "tenant-a", true)
	for _, required := range []bool{true, false} {
		b := startTrustNode(t, "tenant-b", required)
		ctx := t.Context()
		own := goredis.NewClient(&goredis.Options{Addr: b.client, TLSConfig: b.tlsPresenting(t, b.node), MaxRetries: -1, DisableIdentity: true, Protocol: 2})
		if err := own.Ping(ctx).Err(); err != nil {
			t.Errorf("requireClientCertificates %v: B refuses its own certificate on the client port: %v", required, err)
		}
		_ = own.Close()
		foreign := goredis.NewClient(&goredis.Options{Addr: b.client, TLSConfig: b.tlsPresenting(t, a.node), MaxRetries: -1, DisableIdentity: true, Protocol: 2})
		if err := foreign.Ping(ctx).Err(); err == nil {
			t.Errorf("requireClientCertificates %v: B's client port accepts cluster A's node certificate", required)
		}
		_ = foreign.Close()
		if ok, err := b.busAccepts(t, b.node); !ok {
			t.Errorf("requireClientCertificates %v: B's bus refuses B's own certificate (%v): the check cannot tell", required, err)
		}
		if ok, _ := b.busAccepts(t, a.node); ok {
			t.Errorf("requireClientCertificates %v: B's cluster bus accepts cluster A's node certificate", required)
		}
		if ok, _ := b.busAccepts(t, certs.Pair{}); ok {
			t.Errorf("requireClientCertificates %v: B's cluster bus accepts a peer without a certificate", required)
		}
	}
	if ok, err := a.busAccepts(t, a.node); !ok {
		t.Errorf("A's bus refuses A's own certificate: %v", err)
	}
}
