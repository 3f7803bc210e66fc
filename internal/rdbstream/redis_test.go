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
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/middleware-operator/middleware-operator/internal/certs"
	"github.com/middleware-operator/middleware-operator/internal/rdbstream"
	"github.com/middleware-operator/middleware-operator/tests/testredis"
)

// dataset adds to testredis.Dataset the check of what Fetch says of the snapshot.
type dataset struct{ testredis.Dataset }

// checkResult checks what Fetch read of the snapshot's own account of itself: the key and
// TTL counts, and the Redis version and time that wrote it.
func (d dataset) checkResult(t *testing.T, res rdbstream.Result, src *goredis.Client) {
	t.Helper()
	info, _ := src.Info(t.Context(), "server").Result()
	if res.Keys != int64(d.Keys()) || res.Expires != int64(d.Others) || !strings.Contains(info, "redis_version:"+res.RedisVersion+"\r\n") ||
		time.Since(res.Created) > time.Minute {
		t.Fatalf("the snapshot says %d keys, %d with a TTL, Redis %q, created %s; want %d, %d, the server's version, now",
			res.Keys, res.Expires, res.RedisVersion, res.Created, d.Keys(), d.Others)
	}
}

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

// TestFetchRestoresEveryKey fetches the RDB of a cluster-mode master holding every slot,
// written to disk first and streamed diskless, and loads it into a fresh redis-server:
// every key comes back with its value, type and TTL.
func TestFetchRestoresEveryKey(t *testing.T) {
	data := dataset{testredis.Dataset{Strings: 20_000, Others: 200}}
	for _, diskless := range []string{"no", "yes"} {
		t.Run("repl-diskless-sync "+diskless, func(t *testing.T) {
			src := testredis.StartClusterNode(t, t.TempDir(), goredis.Options{}, "--repl-diskless-sync", diskless)
			ctx := t.Context()
			data.Write(t, src.Client)

			out := t.TempDir()
			res := fetchToFile(t, ctx, rdbstream.Options{Addr: src.Addr}, out)
			if res.Diskless != (diskless == "yes") {
				t.Fatalf("Diskless = %v with repl-diskless-sync %s", res.Diskless, diskless)
			}
			data.checkResult(t, res, src.Client)
			data.Check(t, testredis.Restore(t, out))
		})
	}
}

// TestFetchViaDiskStartsAtOnce: a node with repl-diskless-sync yes and its default 5 s
// repl-diskless-sync-delay makes a diskless fetch wait that delay; ViaDisk gets the same
// snapshot written to disk first, without the wait, and it restores every key.
func TestFetchViaDiskStartsAtOnce(t *testing.T) {
	data := dataset{testredis.Dataset{Strings: 20_000, Others: 200}}
	src := testredis.StartClusterNode(t, t.TempDir(), goredis.Options{}, "--repl-diskless-sync", "yes", "--repl-diskless-sync-delay", "5")
	data.Write(t, src.Client)
	took := map[bool]time.Duration{}
	for _, viaDisk := range []bool{false, true} {
		out := t.TempDir()
		start := time.Now()
		res := fetchToFile(t, t.Context(), rdbstream.Options{Addr: src.Addr, ViaDisk: viaDisk}, out)
		took[viaDisk] = time.Since(start)
		if res.Diskless == viaDisk {
			t.Errorf("ViaDisk %v: Diskless = %v", viaDisk, res.Diskless)
		}
		data.checkResult(t, res, src.Client)
		data.Check(t, testredis.Restore(t, out))
	}
	t.Logf("diskless %s, via disk %s", took[false].Round(time.Millisecond), took[true].Round(time.Millisecond))
	if took[false] < 4*time.Second {
		t.Errorf("the diskless fetch took %s, well short of the 5 s delay it must wait: the comparison proves nothing", took[false])
	}
	if took[true] >= 4*time.Second {
		t.Errorf("the fetch via disk took %s, want well under the 5 s delay it skips", took[true])
	}
}

// TestFetchFromReplica takes the snapshot from a replica, as a backup does: it holds what
// the replica had, and the replication ID and offset it reports are the master's history up
// to the writes it holds. A replica cut off from its master refuses (ErrRefused).
func TestFetchFromReplica(t *testing.T) {
	data := dataset{testredis.Dataset{Strings: 5_000, Others: 50}}
	master := testredis.Start(t, t.TempDir(), goredis.Options{Password: "pw"}, "--requirepass", "pw")
	data.Write(t, master.Client)
	replica := testredis.Start(t, t.TempDir(), goredis.Options{Password: "pw"}, "--requirepass", "pw", "--masterauth", "pw",
		"--replicaof", "127.0.0.1", strings.TrimPrefix(master.Addr, "127.0.0.1:"), "--repl-diskless-sync", "no")
	ctx := t.Context()
	offsets := func() (int64, int64) {
		return infoInt(t, master.Client, "master_repl_offset"), infoInt(t, replica.Client, "slave_repl_offset")
	}
	// Writes after the replica's first sync move the offset; wait until the replica has them.
	if err := testredis.WaitFor(ctx, func() bool { return infoInt(t, replica.Client, "master_link_status:up") == 1 }); err != nil {
		t.Fatal("the replica never linked")
	}
	for range 100 {
		i := data.Strings
		if err := master.Client.Set(ctx, fmt.Sprintf("key:%d", i), testredis.Value(i), 0).Err(); err != nil {
			t.Fatal(err)
		}
		data.Strings++
	}
	if err := testredis.WaitFor(ctx, func() bool { m, r := offsets(); return m > 0 && m == r }); err != nil {
		t.Fatal("the replica never caught up")
	}
	before, _ := offsets()

	out := t.TempDir()
	res := fetchToFile(t, ctx, rdbstream.Options{Addr: replica.Addr, Password: "pw"}, out)
	after, _ := offsets()
	info, _ := master.Client.Info(ctx, "replication").Result()
	if !strings.Contains(info, "master_replid:"+res.ReplID) {
		t.Fatalf("the replica's snapshot has replication ID %s, not the master's:\n%s", res.ReplID, info)
	}
	if res.Offset < before || res.Offset > after {
		t.Fatalf("the snapshot is at offset %d; the master was at %d before and %d after", res.Offset, before, after)
	}
	data.checkResult(t, res, replica.Client)
	data.Check(t, testredis.Restore(t, out))

	if err := master.Client.Shutdown(ctx).Err(); err != nil && !strings.Contains(err.Error(), "closed") && !errors.Is(err, goredis.ErrClosed) {
		t.Logf("SHUTDOWN: %v", err)
	}
	if err := testredis.WaitFor(ctx, func() bool { return infoInt(t, replica.Client, "master_link_status:down") == 1 }); err != nil {
		t.Fatal("the replica never saw its master go")
	}
	_, err := rdbstream.Fetch(ctx, rdbstream.Options{Addr: replica.Addr, Password: "pw"}, scratchFile(t))
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
	src := testredis.Start(t, t.TempDir(), goredis.Options{Password: "right"}, "--requirepass", "right")
	ctx := t.Context()
	for _, acl := range [][]any{
		{"ACL", "SETUSER", "backup", "on", ">backup-pw", "+psync", "+replconf"},
		{"ACL", "SETUSER", "app", "on", ">app-pw", "~*", "+@read", "+@write"},
	} {
		if err := src.Client.Do(ctx, acl...).Err(); err != nil {
			t.Fatal(err)
		}
	}
	testredis.Dataset{Strings: 10}.Write(t, src.Client)
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
			res, err := rdbstream.Fetch(ctx, rdbstream.Options{Addr: src.Addr, Username: tc.user, Password: tc.password}, scratchFile(t))
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
	src := testredis.Start(t, dir, goredis.Options{TLSConfig: tlsConf},
		"--tls-cert-file", l.CertFile, "--tls-key-file", l.KeyFile, "--tls-ca-cert-file", l.CAFile, "--tls-auth-clients", "no")
	data := testredis.Dataset{Strings: 2_000, Others: 20}
	data.Write(t, src.Client)
	out := t.TempDir()
	fetchToFile(t, t.Context(), rdbstream.Options{Addr: src.Addr, TLS: tlsConf}, out)
	data.Check(t, testredis.Restore(t, out))

	_, err = rdbstream.Fetch(t.Context(), rdbstream.Options{Addr: src.Addr, TLS: &tls.Config{MinVersion: tls.VersionTLS12}}, scratchFile(t))
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
			src := testredis.Start(t, t.TempDir(), goredis.Options{}, "--repl-diskless-sync", diskless,
				"--rdb-key-save-delay", "500") // microseconds a key: 4,000 keys take 2 s
			data := testredis.Dataset{Strings: 4_000}
			data.Write(t, src.Client)
			ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
			defer cancel()
			start := time.Now()
			_, err := rdbstream.Fetch(ctx, rdbstream.Options{Addr: src.Addr}, scratchFile(t))
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("error %v, want DeadlineExceeded", err)
			}
			if took := time.Since(start); took > time.Second {
				t.Fatalf("Fetch returned after %s, the deadline was 300ms", took)
			}
			t.Log(err)
			if err := src.Client.ConfigSet(t.Context(), "rdb-key-save-delay", "0").Err(); err != nil {
				t.Fatal(err)
			}
			// The node may still be busy with the abandoned fork's snapshot; a new fetch waits for
			// it or starts its own.
			out := t.TempDir()
			fetchToFile(t, t.Context(), rdbstream.Options{Addr: src.Addr}, out)
			data.Check(t, testredis.Restore(t, out))
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
