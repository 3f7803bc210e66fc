package execute

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/middleware-operator/middleware-operator/internal/certs"
	"github.com/middleware-operator/middleware-operator/tests/localcluster"
)

// testServer is a redis-server process in cluster mode started for a test.
type testServer struct {
	tls     *tls.Config // nil: plain text
	addr    string
	port    int
	logPath string
	cmd     *exec.Cmd
	done    chan struct{}
}

// spawner starts every redis-server from one OS thread that lives as long as the test
// binary, so their parent-death signal fires only when the test binary dies, never when
// the Go runtime retires a thread.
var spawner = sync.OnceValue(func() chan func() {
	requests := make(chan func())
	go func() {
		runtime.LockOSThread() // never unlocked: the thread lives as long as the process
		for fn := range requests {
			fn()
		}
	}()
	return requests
})

// requireTools skips the test when redis-server or redis-cli is missing, except in CI where
// it fails.
func requireTools(t testing.TB) {
	t.Helper()
	for _, bin := range []string{"redis-server", "redis-cli"} {
		if _, err := exec.LookPath(bin); err != nil {
			if os.Getenv("CI") != "" {
				t.Fatalf("%s is needed by this test: %v", bin, err)
			}
			t.Skipf("%s is not installed: %v", bin, err)
		}
	}
}

// startServers starts n empty cluster-mode redis-servers on 127.0.0.1 and stops them when
// the test ends. extra is passed to every server (for example "--requirepass", "x").
func startServers(t testing.TB, n int, password string, extra ...string) []*testServer {
	t.Helper()
	requireTools(t)
	dir := t.TempDir()
	servers := make([]*testServer, n)
	for i := range servers {
		var err error
		for attempt := range 5 {
			servers[i], err = startServer(dir, password, extra, nil)
			if err == nil {
				break
			}
			t.Logf("attempt %d to start redis-server: %v", attempt+1, err)
		}
		if err != nil {
			t.Fatalf("while starting redis-server: %v", err)
		}
		stopAtCleanup(t, servers[i])
	}
	return servers
}

// testTLS is the TLS setup of test servers: the files redis-server reads and the client
// configuration that verifies it.
type testTLS struct {
	ca                        certs.Pair
	certFile, keyFile, caFile string
	client                    *tls.Config
}

// args are redis-server's TLS arguments: TLS only on port, and on the bus and replication.
func (c *testTLS) args(port string) []string {
	return []string{"--port", "0", "--tls-port", port, "--tls-cluster", "yes", "--tls-replication", "yes",
		"--tls-auth-clients", "optional", "--tls-cert-file", c.certFile, "--tls-key-file", c.keyFile, "--tls-ca-cert-file", c.caFile}
}

// stopAtCleanup stops s when the test ends, and logs the tail of its log if the test failed.
func stopAtCleanup(t testing.TB, s *testServer) {
	t.Cleanup(func() {
		s.stop()
		if t.Failed() {
			if log, err := os.ReadFile(s.logPath); err == nil {
				t.Logf("log of redis-server %s:\n%s", s.addr, tail(string(log), 20))
			}
		}
	})
}

func startServer(dir, password string, extra []string, tlsSetup *testTLS) (*testServer, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	busPort, err := freePort()
	if err != nil {
		return nil, err
	}
	p := strconv.Itoa(port)
	args := append([]string{
		"--port", p, "--cluster-port", strconv.Itoa(busPort), "--bind", "127.0.0.1",
		"--cluster-enabled", "yes", "--cluster-config-file", filepath.Join(dir, "nodes-"+p+".conf"),
		"--dir", dir, "--appendonly", "no", "--save", "", "--daemonize", "no",
		"--logfile", filepath.Join(dir, "redis-"+p+".log"),
		// Gossip and failure detection go faster than with the default 15s; Create does
		// not depend on it.
		"--cluster-node-timeout", "3000",
	}, extra...)
	if tlsSetup != nil {
		args = append(args, tlsSetup.args(p)...)
	}
	s := &testServer{
		addr:    net.JoinHostPort("127.0.0.1", p),
		port:    port,
		logPath: filepath.Join(dir, "redis-"+p+".log"),
		cmd:     exec.Command("redis-server", args...),
		done:    make(chan struct{}),
	}
	if tlsSetup != nil {
		s.tls = tlsSetup.client
	}
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	started := make(chan error, 1)
	spawner() <- func() { started <- s.cmd.Start() }
	if err := <-started; err != nil {
		return nil, fmt.Errorf("while running redis-server: %w", err)
	}
	go func() {
		_ = s.cmd.Wait()
		close(s.done)
	}()
	if err := s.waitPing(password); err != nil {
		s.stop()
		return nil, err
	}
	return s, nil
}

// waitPing waits until the server answers PING.
func (s *testServer) waitPing(password string) error {
	c := goredis.NewClient(&goredis.Options{Addr: s.addr, Password: password, DialTimeout: time.Second, MaxRetries: -1, TLSConfig: s.tls})
	defer func() { _ = c.Close() }()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var err error
	for ctx.Err() == nil {
		select {
		case <-s.done:
			return fmt.Errorf("redis-server on %s exited", s.addr)
		default:
		}
		if err = c.Ping(ctx).Err(); err == nil {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("while waiting for redis-server on %s to answer PING: %w", s.addr, errors.Join(err, ctx.Err()))
}

// stop kills the server and waits for it to exit.
func (s *testServer) stop() {
	_ = s.cmd.Process.Kill()
	<-s.done
}

// freePort is a free port below the kernel's ephemeral range (see localcluster.FreePorts):
// one the kernel hands out for outgoing connections may be taken again before redis-server
// binds it.
func freePort() (int, error) {
	ports, err := localcluster.FreePorts(1)
	if err != nil {
		return 0, fmt.Errorf("while looking for a free port: %w", err)
	}
	return ports[0], nil
}

func tail(s string, lines int) string {
	all := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(all[max(0, len(all)-lines):], "\n")
}

func addrsOf(servers []*testServer) []string {
	out := make([]string, len(servers))
	for i, s := range servers {
		out[i] = s.addr
	}
	return out
}
