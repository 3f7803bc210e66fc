package rdbstream_test

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/middleware-operator/middleware-operator/internal/certs"
	"github.com/middleware-operator/middleware-operator/internal/localcluster"
	"github.com/middleware-operator/middleware-operator/internal/rdbstream"
)

// node is a redis-server started for a test.
type node struct {
	addr   string
	dir    string
	client *goredis.Client
}

// startRedis starts a redis-server in dir (its working directory: RDB files go there) with
// the given extra arguments, and a client with opts (Addr is filled in). With
// opts.TLSConfig the server listens with TLS only; its certificate arguments are the
// caller's. It skips the test when redis-server is missing, except in CI.
func startRedis(t *testing.T, dir string, opts goredis.Options, extra ...string) *node {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	ports, err := localcluster.FreePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(ports[0])
	listen := []string{"--port", port}
	if opts.TLSConfig != nil {
		listen = []string{"--port", "0", "--tls-port", port}
	}
	// A diskless snapshot starts at once, not after the default 5 s wait for more replicas.
	args := append(append(listen, "--bind", "127.0.0.1", "--dir", dir, "--save", "", "--appendonly", "no",
		"--daemonize", "no", "--logfile", "", "--repl-diskless-sync-delay", "0"), extra...)
	proc, err := localcluster.StartProcess("redis-server", bin, filepath.Join(dir, "redis-"+port+".log"), args, nil)
	if err != nil {
		t.Fatal(err)
	}
	n := &node{addr: "127.0.0.1:" + port, dir: dir}
	opts.Addr, opts.MaxRetries = n.addr, -1
	n.client = goredis.NewClient(&opts)
	t.Cleanup(func() {
		_ = n.client.Close()
		proc.Stop(5 * time.Second)
		if t.Failed() {
			t.Logf("log of redis-server %s:\n%s", n.addr, proc.LogTail(15))
		}
	})
	if err := proc.WaitFor(10*time.Second, func() error { return n.client.Ping(t.Context()).Err() }); err != nil {
		t.Fatal(err)
	}
	return n
}

// dataset is what a test writes and expects back: string keys, a few of every other type,
// and keys with a TTL.
type dataset struct{ strings, others int }

func (d dataset) keys() int { return d.strings + 5*d.others }

func (d dataset) write(t *testing.T, c *goredis.Client) {
	t.Helper()
	ctx := t.Context()
	pipe := c.Pipeline()
	for i := range d.strings {
		pipe.Set(ctx, fmt.Sprintf("key:%d", i), value(i), 0)
		if pipe.Len() == 1000 {
			if _, err := pipe.Exec(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	for i := range d.others {
		pipe.HSet(ctx, fmt.Sprintf("hash:%d", i), "a", i, "b", value(i))
		pipe.RPush(ctx, fmt.Sprintf("list:%d", i), 1, 2, i)
		pipe.SAdd(ctx, fmt.Sprintf("set:%d", i), "x", "y", i)
		pipe.ZAdd(ctx, fmt.Sprintf("zset:%d", i), goredis.Z{Score: float64(i), Member: "m"})
		pipe.Set(ctx, fmt.Sprintf("ttl:%d", i), i, time.Hour)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
}

// checkResult checks what Fetch read of the snapshot's own account of itself: the key and
// TTL counts, and the Redis version and time that wrote it.
func (d dataset) checkResult(t *testing.T, res rdbstream.Result, src *goredis.Client) {
	t.Helper()
	info, _ := src.Info(t.Context(), "server").Result()
	if res.Keys != int64(d.keys()) || res.Expires != int64(d.others) || !strings.Contains(info, "redis_version:"+res.RedisVersion+"\r\n") ||
		time.Since(res.Created) > time.Minute {
		t.Fatalf("the snapshot says %d keys, %d with a TTL, Redis %q, created %s; want %d, %d, the server's version, now",
			res.Keys, res.Expires, res.RedisVersion, res.Created, d.keys(), d.others)
	}
}

// check reads every key back from c.
func (d dataset) check(t *testing.T, c *goredis.Client) {
	t.Helper()
	ctx := t.Context()
	if n, err := c.DBSize(ctx).Result(); err != nil || n != int64(d.keys()) {
		t.Fatalf("DBSIZE = %d (%v), want %d", n, err, d.keys())
	}
	for start := 0; start < d.strings; start += 1000 {
		var keys []string
		for i := start; i < min(start+1000, d.strings); i++ {
			keys = append(keys, fmt.Sprintf("key:%d", i))
		}
		values, err := c.MGet(ctx, keys...).Result()
		if err != nil {
			t.Fatal(err)
		}
		for j, v := range values {
			if v != value(start+j) {
				t.Fatalf("%s = %v, want %s", keys[j], v, value(start+j))
			}
		}
	}
	for i := range d.others {
		h, _ := c.HGetAll(ctx, fmt.Sprintf("hash:%d", i)).Result()
		l, _ := c.LRange(ctx, fmt.Sprintf("list:%d", i), 0, -1).Result()
		s, _ := c.SIsMember(ctx, fmt.Sprintf("set:%d", i), strconv.Itoa(i)).Result()
		z, _ := c.ZScore(ctx, fmt.Sprintf("zset:%d", i), "m").Result()
		ttl, _ := c.TTL(ctx, fmt.Sprintf("ttl:%d", i)).Result()
		if h["a"] != strconv.Itoa(i) || h["b"] != value(i) || len(l) != 3 || l[2] != strconv.Itoa(i) || !s || z != float64(i) ||
			ttl < 50*time.Minute {
			t.Fatalf("key set %d came back as hash %v, list %v, set member %v, zscore %v, ttl %s", i, h, l, s, z, ttl)
		}
	}
}

func value(i int) string { return fmt.Sprintf("value-%d-%s", i, strings.Repeat("v", i%50)) }

// fetchToFile fetches the RDB of opts.Addr into dir/dump.rdb and checks the Result against
// the file.
func fetchToFile(t *testing.T, ctx context.Context, opts rdbstream.Options, dir string) rdbstream.Result {
	t.Helper()
	f, err := os.Create(filepath.Join(dir, "dump.rdb"))
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	res, err := rdbstream.Fetch(ctx, opts, f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(dir, "dump.rdb"))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	t.Logf("fetched %d bytes (RDB %d, diskless %v) from %s in %s; %s at offset %d", res.Bytes, res.RDBVersion, res.Diskless, opts.Addr,
		time.Since(start).Round(time.Millisecond), res.ReplID, res.Offset)
	if res.Bytes != int64(len(data)) || res.SHA256 != hex.EncodeToString(sum[:]) || !res.Checksummed || res.RDBVersion < 9 || len(res.ReplID) != 40 {
		t.Fatalf("result %+v does not describe the %d bytes written", res, len(data))
	}
	return res
}

// restore starts a fresh standalone redis-server on the RDB in dir and returns its client.
func restore(t *testing.T, dir string) *goredis.Client {
	t.Helper()
	return startRedis(t, dir, goredis.Options{}, "--dbfilename", "dump.rdb").client
}

// TestFetchRestoresEveryKey fetches the RDB of a cluster-mode master holding every slot,
// written to disk first and streamed diskless, and loads it into a fresh redis-server:
// every key comes back with its value, type and TTL.
func TestFetchRestoresEveryKey(t *testing.T) {
	data := dataset{strings: 20_000, others: 200}
	for _, diskless := range []string{"no", "yes"} {
		t.Run("repl-diskless-sync "+diskless, func(t *testing.T) {
			dir := t.TempDir()
			src := startRedis(t, dir, goredis.Options{}, "--cluster-enabled", "yes", "--cluster-config-file", filepath.Join(dir, "nodes.conf"),
				"--repl-diskless-sync", diskless)
			ctx := t.Context()
			if err := src.client.Do(ctx, "CLUSTER", "ADDSLOTSRANGE", 0, 16383).Err(); err != nil {
				t.Fatal(err)
			}
			if err := waitFor(ctx, func() bool {
				info, _ := src.client.ClusterInfo(ctx).Result()
				return strings.Contains(info, "cluster_state:ok")
			}); err != nil {
				t.Fatal("the one-node cluster never became ok")
			}
			data.write(t, src.client)

			out := t.TempDir()
			res := fetchToFile(t, ctx, rdbstream.Options{Addr: src.addr}, out)
			if res.Diskless != (diskless == "yes") {
				t.Fatalf("Diskless = %v with repl-diskless-sync %s", res.Diskless, diskless)
			}
			data.checkResult(t, res, src.client)
			data.check(t, restore(t, out))
		})
	}
}

// TestFetchFromReplica takes the snapshot from a replica, as a backup does: it holds what
// the replica had, and the replication ID and offset it reports are the master's history up
// to the writes it holds. A replica cut off from its master refuses (ErrRefused).
func TestFetchFromReplica(t *testing.T) {
	data := dataset{strings: 5_000, others: 50}
	master := startRedis(t, t.TempDir(), goredis.Options{Password: "pw"}, "--requirepass", "pw")
	data.write(t, master.client)
	replica := startRedis(t, t.TempDir(), goredis.Options{Password: "pw"}, "--requirepass", "pw", "--masterauth", "pw",
		"--replicaof", "127.0.0.1", strings.TrimPrefix(master.addr, "127.0.0.1:"), "--repl-diskless-sync", "no")
	ctx := t.Context()
	offsets := func() (int64, int64) {
		return infoInt(t, master.client, "master_repl_offset"), infoInt(t, replica.client, "slave_repl_offset")
	}
	// Writes after the replica's first sync move the offset; wait until the replica has them.
	if err := waitFor(ctx, func() bool { return infoInt(t, replica.client, "master_link_status:up") == 1 }); err != nil {
		t.Fatal("the replica never linked")
	}
	for range 100 {
		i := data.strings
		if err := master.client.Set(ctx, fmt.Sprintf("key:%d", i), value(i), 0).Err(); err != nil {
			t.Fatal(err)
		}
		data.strings++
	}
	if err := waitFor(ctx, func() bool { m, r := offsets(); return m > 0 && m == r }); err != nil {
		t.Fatal("the replica never caught up")
	}
	before, _ := offsets()

	out := t.TempDir()
	res := fetchToFile(t, ctx, rdbstream.Options{Addr: replica.addr, Password: "pw"}, out)
	after, _ := offsets()
	info, _ := master.client.Info(ctx, "replication").Result()
	if !strings.Contains(info, "master_replid:"+res.ReplID) {
		t.Fatalf("the replica's snapshot has replication ID %s, not the master's:\n%s", res.ReplID, info)
	}
	if res.Offset < before || res.Offset > after {
		t.Fatalf("the snapshot is at offset %d; the master was at %d before and %d after", res.Offset, before, after)
	}
	data.checkResult(t, res, replica.client)
	data.check(t, restore(t, out))

	if err := master.client.Shutdown(ctx).Err(); err != nil && !strings.Contains(err.Error(), "closed") && !errors.Is(err, goredis.ErrClosed) {
		t.Logf("SHUTDOWN: %v", err)
	}
	if err := waitFor(ctx, func() bool { return infoInt(t, replica.client, "master_link_status:down") == 1 }); err != nil {
		t.Fatal("the replica never saw its master go")
	}
	_, err := rdbstream.Fetch(ctx, rdbstream.Options{Addr: replica.addr, Password: "pw"}, scratchFile(t))
	if !errors.Is(err, rdbstream.ErrRefused) || !strings.Contains(err.Error(), "NOMASTERLINK") {
		t.Fatalf("a replica without its master: %v, want ErrRefused (NOMASTERLINK)", err)
	}
	t.Log(err)
}

// infoInt reads the integer field of INFO replication; a field given with its value
// ("master_link_status:up") reads 1 when present, 0 when not.
func infoInt(t *testing.T, c *goredis.Client, field string) int64 {
	t.Helper()
	info, err := c.Info(t.Context(), "replication").Result()
	if err != nil {
		return -1
	}
	for line := range strings.SplitSeq(info, "\r\n") {
		if line == field {
			return 1
		}
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	return 0
}

// TestFetchAuthentication: a wrong or missing password and a user without the replication
// commands fail with ErrAuth; a user with only +psync +replconf succeeds.
func TestFetchAuthentication(t *testing.T) {
	src := startRedis(t, t.TempDir(), goredis.Options{Password: "right"}, "--requirepass", "right")
	ctx := t.Context()
	for _, acl := range [][]any{
		{"ACL", "SETUSER", "backup", "on", ">backup-pw", "+psync", "+replconf"},
		{"ACL", "SETUSER", "app", "on", ">app-pw", "~*", "+@read", "+@write"},
	} {
		if err := src.client.Do(ctx, acl...).Err(); err != nil {
			t.Fatal(err)
		}
	}
	dataset{strings: 10}.write(t, src.client)
	cases := map[string]struct {
		user, password string
		err            string
	}{
		"default user, right password": {password: "right"},
		"a backup user":                {user: "backup", password: "backup-pw"},
		"wrong password":               {password: "wrong", err: "WRONGPASS"},
		"no password":                  {err: "NOAUTH"},
		"a user without PSYNC":         {user: "app", password: "app-pw", err: "NOPERM"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			res, err := rdbstream.Fetch(ctx, rdbstream.Options{Addr: src.addr, Username: tc.user, Password: tc.password}, scratchFile(t))
			if tc.err == "" {
				if err != nil || res.Bytes == 0 {
					t.Fatalf("%+v, %v", res, err)
				}
				return
			}
			if !errors.Is(err, rdbstream.ErrAuth) || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("error %v, want ErrAuth with %s", err, tc.err)
			}
			t.Log(err)
		})
	}
}

// TestFetchOverTLS fetches from a TLS-only node with its CA; without the CA the handshake
// fails.
func TestFetchOverTLS(t *testing.T) {
	dir := t.TempDir()
	l, err := certs.NewLoopback(dir, "rdbstream-test-ca", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(l.CA.Cert)
	tlsConf := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	src := startRedis(t, dir, goredis.Options{TLSConfig: tlsConf},
		"--tls-cert-file", l.CertFile, "--tls-key-file", l.KeyFile, "--tls-ca-cert-file", l.CAFile, "--tls-auth-clients", "no")
	data := dataset{strings: 2_000, others: 20}
	data.write(t, src.client)
	out := t.TempDir()
	fetchToFile(t, t.Context(), rdbstream.Options{Addr: src.addr, TLS: tlsConf}, out)
	data.check(t, restore(t, out))

	_, err = rdbstream.Fetch(t.Context(), rdbstream.Options{Addr: src.addr, TLS: &tls.Config{MinVersion: tls.VersionTLS12}}, scratchFile(t))
	var unknown x509.UnknownAuthorityError
	if !errors.As(err, &unknown) {
		t.Fatalf("without the CA: %v, want an unknown authority error", err)
	}
	t.Log(err)
}

// TestFetchDeadline: a node that takes seconds to write its snapshot (rdb-key-save-delay) is
// left as soon as the context's deadline passes, with a context error, and a second fetch
// with time enough succeeds.
func TestFetchDeadline(t *testing.T) {
	for _, diskless := range []string{"no", "yes"} {
		t.Run("repl-diskless-sync "+diskless, func(t *testing.T) {
			src := startRedis(t, t.TempDir(), goredis.Options{}, "--repl-diskless-sync", diskless,
				"--rdb-key-save-delay", "500") // microseconds a key: 4,000 keys take 2 s
			data := dataset{strings: 4_000}
			data.write(t, src.client)
			ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
			defer cancel()
			start := time.Now()
			_, err := rdbstream.Fetch(ctx, rdbstream.Options{Addr: src.addr}, scratchFile(t))
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("error %v, want DeadlineExceeded", err)
			}
			if took := time.Since(start); took > time.Second {
				t.Fatalf("Fetch returned after %s, the deadline was 300ms", took)
			}
			t.Log(err)
			if err := src.client.ConfigSet(t.Context(), "rdb-key-save-delay", "0").Err(); err != nil {
				t.Fatal(err)
			}
			// The node may still be busy with the abandoned fork's snapshot; a new fetch waits for
			// it or starts its own.
			out := t.TempDir()
			fetchToFile(t, t.Context(), rdbstream.Options{Addr: src.addr}, out)
			data.check(t, restore(t, out))
		})
	}
}

// scratchFile is a file the test throws away.
func scratchFile(t *testing.T) *os.File {
	f, err := os.Create(filepath.Join(t.TempDir(), "dump.rdb"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() })
	return f
}

// waitFor polls cond every 50 ms for up to 20 s.
func waitFor(ctx context.Context, cond func() bool) error {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	for !cond() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return nil
}
