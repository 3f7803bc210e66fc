package execute

import (
	"context"
	"crypto/tls"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/middleware-operator/middleware-operator/internal/certs"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/conn"
)

// startTLSServers is startServers with TLS only (port 0, TLS on the client port, the
// cluster bus and replication), one certificate for all, signed by a fresh CA and naming
// "redis.test"; it returns the servers and the TLS setup (the client configuration that
// verifies them is its client).
func startTLSServers(t *testing.T, n int, password string) ([]*testServer, *testTLS) {
	t.Helper()
	requireTools(t)
	dir := t.TempDir()
	now := time.Now()
	ca, err := certs.NewCA("test", now, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	server, err := certs.NewServer(ca, []string{"redis.test"}, []net.IP{net.IPv4(127, 0, 0, 1)}, now, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{"ca.crt": ca.Cert, "tls.crt": server.Cert, "tls.key": server.Key}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	pool, err := certs.Pool(ca.Cert)
	if err != nil {
		t.Fatal(err)
	}
	setup := &testTLS{
		ca:       ca,
		certFile: filepath.Join(dir, "tls.crt"), keyFile: filepath.Join(dir, "tls.key"), caFile: filepath.Join(dir, "ca.crt"),
		client: &tls.Config{RootCAs: pool, ServerName: "redis.test", MinVersion: tls.VersionTLS12},
	}
	extra := []string{}
	if password != "" {
		extra = append(extra, "--requirepass", password, "--masterauth", password)
	}
	servers := make([]*testServer, n)
	for i := range servers {
		if servers[i], err = startServer(dir, password, extra, setup); err != nil {
			t.Fatalf("while starting redis-server with TLS: %v", err)
		}
		stopAtCleanup(t, servers[i])
	}
	return servers, setup
}

// TestAdminOverTLS forms a cluster of TLS-only nodes through an Admin with the cluster's
// TLS configuration, writes keys, and moves slots with their keys to a fourth master: the
// nodes MIGRATE over TLS (tls-cluster yes) with the password. Every key reads back, and
// the password functions work over TLS too.
func TestAdminOverTLS(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	const pw = "tls-secret"
	servers, setup := startTLSServers(t, 4, pw)
	cfg := setup.client
	admin := NewAdmin(pw, 2*time.Second).WithTLS(cfg)
	defer func() { _ = admin.Close() }()
	createCluster(ctx, t, admin, servers[:3], 0)
	entry := servers[0].addr

	plain := NewAdmin(pw, time.Second)
	defer func() { _ = plain.Close() }()
	if _, err := plain.ClusterNodes(ctx, entry); err == nil {
		t.Error("a plain-text admin read CLUSTER NODES from a TLS-only node")
	}

	cc := goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: []string{entry}, Password: pw, TLSConfig: cfg, Protocol: 2, DisableIdentity: true})
	defer func() { _ = cc.Close() }()
	const keys = 5000
	writeKeys(ctx, t, cc, keys)

	if err := admin.AddNode(ctx, servers[3].addr, entry, ""); err != nil {
		t.Fatal(err)
	}
	target, _, err := admin.Myself(ctx, servers[3].addr)
	if err != nil {
		t.Fatal(err)
	}
	stats, err := admin.Reshard(ctx, []string{entry}, 1000, nil, target.ID, MoveOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("moved %d slots and %d keys over TLS in %v", stats.Slots, stats.Keys, stats.Elapsed.Round(time.Millisecond))
	if stats.Slots != 1000 || stats.Keys == 0 {
		t.Errorf("moved %d slots and %d keys, want 1000 slots and some keys", stats.Slots, stats.Keys)
	}
	if counts := slotCounts(ctx, t, admin, entry); counts[servers[3].addr] != 1000 {
		t.Errorf("the new master serves %d slots, want 1000", counts[servers[3].addr])
	}
	readKeys(ctx, t, cc, keys)
	direct := goredis.NewClient(&goredis.Options{Addr: servers[3].addr, Password: pw, TLSConfig: cfg})
	defer func() { _ = direct.Close() }()
	if n, err := direct.DBSize(ctx).Result(); err != nil || n != stats.Keys {
		t.Errorf("the new master holds %d keys (%v), want the %d moved", n, err, stats.Keys)
	}

	if ok, err := conn.Accepts(ctx, entry, cfg, conn.Login{Password: pw}); err != nil || !ok {
		t.Errorf("Accepts over TLS = %v, %v", ok, err)
	}
	if err := AddPassword(ctx, entry, cfg, PasswordChange{User: "default", AsPasswords: []string{pw}, New: "next", MasterAuth: true}); err != nil {
		t.Errorf("AddPassword over TLS: %v", err)
	}
	if ok, err := conn.Accepts(ctx, entry, nil, conn.Login{Password: pw}); err == nil || ok {
		t.Errorf("Accepts in plain text = %v, %v; want an error", ok, err)
	}
}

// TestReloadTLS: a node serves a certificate written over its files once ReloadTLS asks it
// to read them again, and not before.
func TestReloadTLS(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	servers, setup := startTLSServers(t, 1, "pw")
	addr := servers[0].addr
	renewed, err := certs.NewServer(setup.ca, []string{"redis.test"}, nil, time.Now(), 2*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	newCert, err := certs.ParseCert(renewed.Cert)
	if err != nil {
		t.Fatal(err)
	}
	for file, data := range map[string][]byte{setup.certFile: renewed.Cert, setup.keyFile: renewed.Key} {
		if err := os.WriteFile(file, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if ok, err := ServesCertificate(ctx, addr, setup.client, newCert.Raw); err != nil || ok {
		t.Fatalf("before the reload the node serves the new certificate: %v, %v", ok, err)
	}
	if err := ReloadTLS(ctx, addr, setup.client, conn.Login{Password: "pw"}, setup.certFile); err != nil {
		t.Fatal(err)
	}
	if ok, err := ServesCertificate(ctx, addr, setup.client, newCert.Raw); err != nil || !ok {
		t.Errorf("after the reload the node does not serve the new certificate: %v, %v", ok, err)
	}
}
