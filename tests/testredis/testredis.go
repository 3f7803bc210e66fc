// Package testredis runs redis-server processes for tests, on free loopback ports with the
// lifecycle of the local cluster's components (killed with the test process), and writes a
// data set of every common type that a test reads back after a restore.
package testredis

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/middleware-operator/middleware-operator/tests/localcluster"
)

// Server is a redis-server started for a test.
type Server struct {
	// Addr is its host:port; Dir its working directory, where its RDB files go.
	Addr, Dir string
	// Client is a client with the options Start was given.
	Client *goredis.Client
}

// Start starts a redis-server in dir with the given extra arguments, and a client with opts
// (Addr is filled in), and stops both when the test ends. With opts.TLSConfig the server
// listens with TLS only; its certificate arguments are the caller's. Diskless replication
// starts at once (repl-diskless-sync-delay 0) unless extra says otherwise. It skips the
// test when redis-server is missing, except in CI.
func Start(t testing.TB, dir string, opts goredis.Options, extra ...string) *Server {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	for attempt := 1; ; attempt++ {
		s, proc, err := start(dir, bin, opts, extra)
		if err == nil {
			t.Cleanup(func() {
				_ = s.Client.Close()
				proc.Stop(5 * time.Second)
				if t.Failed() {
					t.Logf("log of redis-server %s:\n%s", s.Addr, proc.LogTail(15))
				}
			})
			return s
		}
		// A port drawn free can be taken before redis-server binds it (other tests draw
		// from the same range at once): draw again, the cluster bus port too.
		if proc == nil || attempt == 3 || !strings.Contains(proc.LogTail(15), "Address already in use") {
			if proc != nil {
				t.Logf("log of redis-server:\n%s", proc.LogTail(15))
			}
			t.Fatal(err)
		}
		t.Logf("redis-server could not bind its ports (attempt %d): drawing others", attempt)
		if extra, err = redrawClusterPort(extra); err != nil {
			t.Fatal(err)
		}
	}
}

// start starts a redis-server once and waits until it answers; on failure the process (if
// it started) is stopped and returned for its log.
func start(dir, bin string, opts goredis.Options, extra []string) (*Server, *localcluster.Process, error) {
	ports, err := localcluster.FreePorts(1)
	if err != nil {
		return nil, nil, err
	}
	port := strconv.Itoa(ports[0])
	listen := []string{"--port", port}
	if opts.TLSConfig != nil {
		listen = []string{"--port", "0", "--tls-port", port}
	}
	args := append(append(listen, "--bind", "127.0.0.1", "--dir", dir, "--save", "", "--appendonly", "no",
		"--daemonize", "no", "--logfile", "", "--repl-diskless-sync-delay", "0"), extra...)
	proc, err := localcluster.StartProcess("redis-server", bin, filepath.Join(dir, "redis-"+port+".log"), args, nil)
	if err != nil {
		return nil, nil, err
	}
	s := &Server{Addr: "127.0.0.1:" + port, Dir: dir}
	opts.Addr, opts.MaxRetries = s.Addr, -1
	s.Client = goredis.NewClient(&opts)
	if err := proc.WaitFor(10*time.Second, func() error { return s.Client.Ping(context.Background()).Err() }); err != nil {
		_ = s.Client.Close()
		proc.Stop(5 * time.Second)
		return nil, proc, err
	}
	return s, proc, nil
}

// redrawClusterPort gives the --cluster-port of args (if any) another free port.
func redrawClusterPort(args []string) ([]string, error) {
	out := slices.Clone(args)
	for i := range len(out) - 1 {
		if out[i] == "--cluster-port" {
			bus, err := localcluster.FreePorts(1)
			if err != nil {
				return nil, err
			}
			out[i+1] = strconv.Itoa(bus[0])
		}
	}
	return out, nil
}

// StartClusterNode starts a cluster-mode redis-server that serves every slot alone, as one
// shard of a cluster does for its slots; opts and extra are as for Start.
func StartClusterNode(t testing.TB, dir string, opts goredis.Options, extra ...string) *Server {
	t.Helper()
	s := Start(t, dir, opts, append(ClusterArgs(t, dir), extra...)...)
	ctx := context.Background()
	if err := s.Client.Do(ctx, "CLUSTER", "ADDSLOTSRANGE", 0, 16383).Err(); err != nil {
		t.Fatal(err)
	}
	if err := WaitFor(ctx, func() bool {
		info, _ := s.Client.ClusterInfo(ctx).Result()
		return strings.Contains(info, "cluster_state:ok")
	}); err != nil {
		t.Fatal("the one-node cluster never became ok")
	}
	return s
}

// ClusterArgs are the arguments of a cluster-mode redis-server whose state is in dir, with a
// cluster bus port of its own: left to Redis, it is the client port + 10000, which lands in
// the kernel's ephemeral range, where another test's outgoing connection may hold it.
func ClusterArgs(t testing.TB, dir string) []string {
	t.Helper()
	bus, err := localcluster.FreePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	return []string{"--cluster-enabled", "yes", "--cluster-config-file", filepath.Join(dir, "nodes.conf"),
		"--cluster-port", strconv.Itoa(bus[0])}
}

// Restore starts a fresh standalone redis-server that loads dir/dump.rdb, and returns its
// client.
func Restore(t testing.TB, dir string) *goredis.Client {
	t.Helper()
	return Start(t, dir, goredis.Options{}, "--dbfilename", "dump.rdb").Client
}

// WaitFor polls cond every 50 ms for up to 20 s.
func WaitFor(ctx context.Context, cond func() bool) error {
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

// Dataset is what a test writes and expects back: Strings string keys key:<i>, and Others
// keys of each other type (hash, list, set, sorted set) plus Others string keys with a TTL
// of an hour.
type Dataset struct{ Strings, Others int }

// Keys is the number of keys the data set writes.
func (d Dataset) Keys() int { return d.Strings + 5*d.Others }

// Value is the value of key:<i>.
func Value(i int) string { return fmt.Sprintf("value-%d-%s", i, strings.Repeat("v", i%50)) }

// Write writes the data set through c, in pipelines of 1,000 commands.
func (d Dataset) Write(t testing.TB, c *goredis.Client) {
	t.Helper()
	ctx := context.Background()
	pipe := c.Pipeline()
	for i := range d.Strings {
		pipe.Set(ctx, fmt.Sprintf("key:%d", i), Value(i), 0)
		if pipe.Len() == 1000 {
			if _, err := pipe.Exec(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	for i := range d.Others {
		pipe.HSet(ctx, fmt.Sprintf("hash:%d", i), "a", i, "b", Value(i))
		pipe.RPush(ctx, fmt.Sprintf("list:%d", i), 1, 2, i)
		pipe.SAdd(ctx, fmt.Sprintf("set:%d", i), "x", "y", i)
		pipe.ZAdd(ctx, fmt.Sprintf("zset:%d", i), goredis.Z{Score: float64(i), Member: "m"})
		pipe.Set(ctx, fmt.Sprintf("ttl:%d", i), i, time.Hour)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
}

// Check reads every key of the data set back from c, with its value, type and TTL, and
// fails the test on the first difference or on a key too many.
func (d Dataset) Check(t testing.TB, c *goredis.Client) {
	t.Helper()
	ctx := context.Background()
	if n, err := c.DBSize(ctx).Result(); err != nil || n != int64(d.Keys()) {
		t.Fatalf("DBSIZE = %d (%v), want %d", n, err, d.Keys())
	}
	for start := 0; start < d.Strings; start += 1000 {
		var keys []string
		for i := start; i < min(start+1000, d.Strings); i++ {
			keys = append(keys, fmt.Sprintf("key:%d", i))
		}
		values, err := c.MGet(ctx, keys...).Result()
		if err != nil {
			t.Fatal(err)
		}
		for j, v := range values {
			if v != Value(start+j) {
				t.Fatalf("%s = %v, want %s", keys[j], v, Value(start+j))
			}
		}
	}
	for i := range d.Others {
		h, _ := c.HGetAll(ctx, fmt.Sprintf("hash:%d", i)).Result()
		l, _ := c.LRange(ctx, fmt.Sprintf("list:%d", i), 0, -1).Result()
		s, _ := c.SIsMember(ctx, fmt.Sprintf("set:%d", i), strconv.Itoa(i)).Result()
		z, _ := c.ZScore(ctx, fmt.Sprintf("zset:%d", i), "m").Result()
		ttl, _ := c.TTL(ctx, fmt.Sprintf("ttl:%d", i)).Result()
		if h["a"] != strconv.Itoa(i) || h["b"] != Value(i) || len(l) != 3 || l[2] != strconv.Itoa(i) || !s || z != float64(i) ||
			ttl < 50*time.Minute {
			t.Fatalf("key set %d came back as hash %v, list %v, set member %v, zscore %v, ttl %s", i, h, l, s, z, ttl)
		}
	}
}
