package ha

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
	"github.com/middleware-operator/middleware-operator/internal/crashpoint"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/execute"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/nodes"
	"github.com/middleware-operator/middleware-operator/tests/redispods"
	"github.com/middleware-operator/middleware-operator/tests/redistest"
	"github.com/middleware-operator/middleware-operator/tests/testenv"
)

// binDir holds the operator binary this package's tests run; TestMain removes it.
var binDir string

func TestMain(m *testing.M) {
	testenv.TestsAtATime(3) // each on its own local cluster
	var err error
	if binDir, err = os.MkdirTemp("", "mwo-ha-"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	_ = os.RemoveAll(binDir)
	os.Exit(code)
}

// operatorBinary builds the operator once for the whole package, with crash points compiled
// in (armed only by a test that sets crashpoint.Env).
var operatorBinary = sync.OnceValues(func() (string, error) {
	bin := filepath.Join(binDir, "manager")
	build := exec.Command("go", "build", "-tags", crashpoint.Tag, "-o", bin, ".")
	build.Dir = testenv.RepoRoot()
	if out, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build: %w\n%s", err, out)
	}
	return bin, nil
})

// rig is a local cluster whose Redis pods run redis-server, with the operator binary run
// as processes the test starts and kills, as a kubelet runs the operator's pods.
type rig struct {
	env     *testenv.Env
	kubelet *redispods.Kubelet
	bin     string
	started int
}

func newRig(t *testing.T) *rig {
	t.Helper()
	bin, err := operatorBinary()
	if err != nil {
		t.Fatal(err)
	}
	env, err := testenv.Start(t.Context(), 3)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(env.Stop)
	ctx, cancel := context.WithCancel(context.Background())
	kubelet, err := redispods.Watching(env.Cluster.Config, filepath.Join(env.Cluster.Dir, "redis-data"), nil)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { kubelet.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return &rig{env: env, kubelet: kubelet, bin: bin}
}

// operator starts one more operator process with the shipped leader election settings and
// environ added to its environment.
func (r *rig) operator(t *testing.T, environ ...string) *replica {
	t.Helper()
	r.started++
	return start(t, r.env, r.bin, r.started, environ...)
}

// formed creates a RedisCluster of 6 nodes in a new namespace and waits until it runs 3
// masters; it returns its key, status and password.
func (r *rig) formed(t *testing.T) (client.ObjectKey, *redisv1alpha1.RedisCluster, string) {
	t.Helper()
	ns := r.env.Namespace(t)
	rc := redistest.NewCluster(ns, "cache", 6)
	if err := r.env.Client.Create(t.Context(), rc); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(rc)
	rc = redistest.WaitShape(t, r.env.Client, key, 3, 6)
	return key, rc, redistest.Password(t, r.env.Client, ns, rc.Name)
}

// stop sends sig to the process and waits for it to end; it returns how long that took.
func (p *replica) stop(t *testing.T, sig syscall.Signal) time.Duration {
	t.Helper()
	sent := time.Now()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	_ = p.cmd.Wait()
	return time.Since(sent)
}

// wake resumes the stopped (SIGSTOP) process and waits at most within for it to exit, as a
// woken leader without its lease does; it returns how long that took, and false when it
// still ran.
func (p *replica) wake(t *testing.T, within time.Duration) (time.Duration, bool) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	woke := time.Now()
	done := make(chan struct{})
	go func() { _ = p.cmd.Wait(); close(done) }()
	select {
	case <-done:
		return time.Since(woke), true
	case <-time.After(within):
		return time.Since(woke), false
	}
}

// selves reads every node's own line of CLUSTER NODES, keyed by address; a node that does
// not answer is left out.
func selves(ctx context.Context, admin *execute.Admin, addrs []string) map[string]nodes.Node {
	out := map[string]nodes.Node{}
	for _, addr := range addrs {
		nodes, err := admin.ClusterNodes(ctx, addr)
		if err != nil {
			continue
		}
		for _, n := range nodes {
			if n.Myself {
				out[addr] = n
			}
		}
	}
	return out
}

// views is each answering node's id, role, master, config epoch, slots and open slots,
// keyed by address.
func views(ctx context.Context, admin *execute.Admin, addrs []string) map[string]string {
	out := map[string]string{}
	for addr, n := range selves(ctx, admin, addrs) {
		out[addr] = fmt.Sprintf("%s %s master=%s epoch=%d slots=%v migrating=%v importing=%v",
			n.ID, strings.Join(n.Flags, ","), n.MasterID, n.ConfigEpoch, n.Slots, n.Migrating, n.Importing)
	}
	return out
}

// openSlots lists the slots some answering node has open (MIGRATING or IMPORTING).
func openSlots(ctx context.Context, admin *execute.Admin, addrs []string) []string {
	var open []string
	for addr, n := range selves(ctx, admin, addrs) {
		for s, to := range n.Migrating {
			open = append(open, fmt.Sprintf("%d migrating on %s to %s", s, addr, to))
		}
		for s, from := range n.Importing {
			open = append(open, fmt.Sprintf("%d importing on %s from %s", s, addr, from))
		}
	}
	return open
}

func addrsOf(rc *redisv1alpha1.RedisCluster) []string {
	var addrs []string
	for _, n := range rc.Status.Nodes {
		addrs = append(addrs, n.Instance)
	}
	return addrs
}
