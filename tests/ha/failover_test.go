// Package ha runs the operator binary twice with leader election on the local cluster, as
// its Deployment ships it (2 replicas), and kills the leader with SIGKILL while AppServices
// are being created: the other replica must take over and reconcile, and no child may be
// made twice.
package ha

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appsv1api "github.com/middleware-operator/middleware-operator/api/apps/v1"
	"github.com/middleware-operator/middleware-operator/tests/testenv"
)

// leaseName is the operator's default leader election Lease.
const leaseName = "middleware-operator.middleware-operator.io"

// replica is one running operator process.
type replica struct {
	cmd *exec.Cmd
	log string
}

func start(t *testing.T, env *testenv.Env, bin string, n int, environ ...string) *replica {
	t.Helper()
	log := filepath.Join(env.Cluster.Dir, fmt.Sprintf("operator-%d.log", n))
	f, err := os.Create(log)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--kubeconfig="+env.Cluster.Kubeconfig, "--metrics-bind-address=0", "--health-probe-bind-address=0",
		"--leader-elect", "--leader-election-namespace=default")
	cmd.Stdout, cmd.Stderr = f, f
	cmd.Env = append(os.Environ(), environ...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait(); _ = f.Close() })
	return &replica{cmd: cmd, log: log}
}

// leads reports whether the replica's log says it acquired the lease.
func (r *replica) leads() bool {
	data, _ := os.ReadFile(r.log)
	return strings.Contains(strings.ToLower(string(data)), "successfully acquired lease")
}

func appService(ns, name string) *appsv1api.AppService {
	return &appsv1api.AppService{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: appsv1api.AppServiceSpec{Size: ptr.To[int32](1), Image: "nginx:1.27",
			Ports: []appsv1api.AppServicePort{{Port: 80, TargetPort: intstr.FromInt32(80)}}},
	}
}

// TestLeaderFailover kills the leading replica five times, each time creating an
// AppService at once, and measures how long until the other replica has made its
// Deployment. It logs min, median and max; it fails only beyond the lease's worst case.
func TestLeaderFailover(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	env, err := testenv.Start(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer env.Stop()
	bin, err := operatorBinary()
	if err != nil {
		t.Fatal(err)
	}
	ns := env.Namespace(t)
	replicas := []*replica{start(t, env, bin, 0), start(t, env, bin, 1)}
	deployed := func(name string) func(ctx context.Context) (bool, string) {
		return func(ctx context.Context) (bool, string) {
			err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &appsv1.Deployment{})
			return err == nil, fmt.Sprintf("no Deployment %s yet: %v", name, err)
		}
	}
	if err := env.Client.Create(ctx, appService(ns, "warm")); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, time.Minute, deployed("warm"))

	var took []time.Duration
	for round := range 5 {
		var leader int
		testenv.Eventually(t, time.Minute, func(context.Context) (bool, string) {
			leader = slices.IndexFunc(replicas, func(r *replica) bool { return r.cmd.ProcessState == nil && r.leads() })
			if leader >= 0 {
				return true, ""
			}
			data, _ := os.ReadFile(replicas[0].log)
			return false, "no replica says it leads; the first one logged:\n" + string(data[:min(len(data), 3000)])
		})
		lease := &coordinationv1.Lease{}
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: "default", Name: leaseName}, lease); err != nil {
			t.Fatal(err)
		}
		killed := time.Now()
		if err := replicas[leader].cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		_ = replicas[leader].cmd.Wait()
		name := fmt.Sprintf("round-%d", round)
		if err := env.Client.Create(ctx, appService(ns, name)); err != nil {
			t.Fatal(err)
		}
		testenv.Eventually(t, time.Minute, deployed(name))
		took = append(took, time.Since(killed))
		t.Logf("round %d: the leader (holder %s) was killed; the other replica made the new Deployment %s later",
			round, ptr.Deref(lease.Spec.HolderIdentity, "?"), took[round].Round(100*time.Millisecond))
		// A new replica stands in for the killed one, as the Deployment's ReplicaSet would.
		replicas[leader] = start(t, env, bin, 2+round)
	}
	slices.Sort(took)
	t.Logf("leader failover (SIGKILL to the new leader's first reconcile), 5 runs: min %s, median %s, max %s",
		took[0].Round(100*time.Millisecond), took[2].Round(100*time.Millisecond), took[4].Round(100*time.Millisecond))
	// The lease (15 s) must expire after the last renewal, then the follower retries every
	// 2 s: beyond 15 + 2 s and a few seconds to start the controllers, something is wrong.
	if took[4] > 25*time.Second {
		t.Errorf("the slowest failover took %s, want under 25 s with a 15 s lease", took[4])
	}

	// No child was made twice: one Deployment and one Service per AppService, each made by
	// exactly one create (their UIDs are what the AppServices own).
	// The last round waited for its Deployment only: its Service comes in the same
	// reconcile, a moment later.
	testenv.Eventually(t, time.Minute, func(ctx context.Context) (bool, string) {
		deps := &appsv1.DeploymentList{}
		svcs := &corev1.ServiceList{}
		if err := env.Client.List(ctx, deps, client.InNamespace(ns)); err != nil {
			return false, err.Error()
		}
		if err := env.Client.List(ctx, svcs, client.InNamespace(ns)); err != nil {
			return false, err.Error()
		}
		if len(deps.Items) > 6 || len(svcs.Items) > 6 {
			t.Fatalf("%d Deployments and %d Services for 6 AppServices", len(deps.Items), len(svcs.Items))
		}
		return len(deps.Items) == 6 && len(svcs.Items) == 6, fmt.Sprintf("%d Deployments and %d Services for 6 AppServices", len(deps.Items), len(svcs.Items))
	})
	for _, r := range replicas {
		if data, _ := os.ReadFile(r.log); strings.Contains(string(data), "already exists") {
			t.Errorf("a replica tried to create a child that existed:\n%s", data)
		}
	}
}
