package ha

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
	controllers "github.com/middleware-operator/middleware-operator/controllers/redis"
	"github.com/middleware-operator/middleware-operator/internal/crashpoint"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/execute"
	"github.com/middleware-operator/middleware-operator/tests/redistest"
	"github.com/middleware-operator/middleware-operator/tests/testenv"
)

// TestOperatorKilledDuringAssignReceive kills the operator process five times while it
// moves slots to two new masters (AssignReceive, one key per MIGRATE so the moves take a
// while), alternately with SIGTERM (a rollout, a drained node) and SIGKILL (an OOM kill,
// a lost node), each time starting a new one as the Deployment's kubelet would. After a
// SIGTERM the process must end within its 30 s grace period leaving no slot open; after a
// SIGKILL, slots may be open and the next process must close them. In the end the new
// masters hold exactly the requested slots and no acknowledged key is lost.
func TestOperatorKilledDuringAssignReceive(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	op := r.operator(t)
	run := startAssignReceive(t, r)
	last := 0
	// inherited are the slots a SIGKILL left open, which the next process closes (a step at a
	// time, so a SIGTERM may find some of them still open); a SIGTERM must leave no other.
	inherited := map[string]bool{}
	// midBatch counts, per signal, the kills that landed inside a batch of slot moves (a
	// SIGTERM right after a batch was seen under way, a SIGKILL that left a slot open): the
	// faults this test is named for; a run without one of each proves nothing.
	midBatch := map[syscall.Signal]int{}
	for round := range 5 {
		// The first kill lands while the new nodes join; the others once the new process has
		// moved more slots, somewhere inside a batch or between two.
		testenv.Eventually(t, 2*time.Minute, func(ctx context.Context) (bool, string) {
			n, _ := run.moved(ctx)
			return op.leads() && (round == 0 || n > last || n >= 2900), fmt.Sprintf("the new process leads: %t; %d slots moved", op.leads(), n)
		})
		sig := []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL}[round%2]
		underWay := false
		if round > 0 {
			// A SIGTERM while a batch is under way shows the batch finished; a SIGKILL then
			// leaves it half done for the next process.
			underWay = run.waitForOpenSlots(t, inherited)
		} else {
			time.Sleep(time.Duration(300+rand.IntN(1200)) * time.Millisecond)
		}
		n, addrs := run.moved(t.Context())
		last = n
		if n >= 2900 {
			t.Logf("round %d: the moves were done before the kill", round)
			break
		}
		took := op.stop(t, sig)
		open := openSlots(t.Context(), run.admin, addrs)
		fresh := 0
		for _, o := range open {
			if !inherited[slotOf(o)] {
				fresh++
			}
		}
		if (sig == syscall.SIGTERM && underWay) || (sig == syscall.SIGKILL && fresh > 0) {
			midBatch[sig]++
		}
		t.Logf("round %d: %s with %d of 2900 slots moved; the process ended after %s; %d slots open %v",
			round, sig, n, took.Round(10*time.Millisecond), len(open), open[:min(len(open), 2)])
		if sig == syscall.SIGTERM {
			if took > 30*time.Second {
				t.Errorf("the operator took %s to end after SIGTERM, beyond its 30 s grace period", took)
			}
			var left []string
			for _, o := range open {
				if !inherited[slotOf(o)] {
					left = append(left, o)
				}
			}
			if len(left) > 0 {
				t.Errorf("the operator ended on SIGTERM with %d slots open that no earlier kill left open: %v", len(left), left[:min(len(left), 5)])
			}
		}
		inherited = map[string]bool{}
		for _, o := range open {
			inherited[slotOf(o)] = true
		}
		op = r.operator(t)
	}
	if midBatch[syscall.SIGTERM] == 0 || midBatch[syscall.SIGKILL] == 0 {
		t.Errorf("kills inside a batch of slot moves: %d SIGTERM, %d SIGKILL; want at least one of each, or the test showed no interrupted step",
			midBatch[syscall.SIGTERM], midBatch[syscall.SIGKILL])
	}
	run.finish(t)
}

// TestStalledLeaderResumes: the leader freezes (SIGSTOP: a long GC pause, a frozen VM, a
// node cut off) in the middle of an AssignReceive batch. Its lease expires, the other replica
// takes over and goes on moving slots. Then the old leader wakes (SIGCONT) with its batch
// half done: two operators race on the same slots until it notices it lost its lease. The
// end must still be exact: every requested slot moved once, none open, no key lost.
func TestStalledLeaderResumes(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	ops := []*replica{r.operator(t), r.operator(t)}
	run := startAssignReceive(t, r)
	var leader int
	testenv.Eventually(t, 2*time.Minute, func(ctx context.Context) (bool, string) {
		leader = slices.IndexFunc(ops, func(p *replica) bool { return p.leads() })
		n, _ := run.moved(ctx)
		return leader >= 0 && n > 0, fmt.Sprintf("leader %d; %d slots moved", leader, n)
	})
	run.waitForOpenSlots(t, map[string]bool{})
	if err := ops[leader].cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	n, _ := run.moved(t.Context())
	other := ops[1-leader]
	testenv.Eventually(t, time.Minute, func(context.Context) (bool, string) { return other.leads(), "the other replica does not lead yet" })
	t.Logf("the leader froze with %d slots moved; the other replica took over %s later", n, time.Since(stopped).Round(100*time.Millisecond))
	testenv.Eventually(t, time.Minute, func(ctx context.Context) (bool, string) {
		m, _ := run.moved(ctx)
		return m > n, fmt.Sprintf("%d slots moved", m)
	})
	if exited, ok := ops[leader].wake(t, 45*time.Second); ok {
		log, _ := os.ReadFile(ops[leader].log)
		t.Logf("the old leader woke and exited %s later (%v); its fence stopped %d Redis steps (log lines saying %q)",
			exited.Round(100*time.Millisecond), ops[leader].cmd.ProcessState,
			strings.Count(string(log), controllers.ErrFenced.Error()), controllers.ErrFenced.Error())
	} else {
		t.Errorf("the old leader still runs 45 s after it woke without its lease")
	}
	run.finish(t)
}

// assignRun is an AssignReceive scale out 6 -> 8 (2,000 slots from the first master, 900
// from the other two) over 1,000,000 keys moved one per MIGRATE, under a writer.
type assignRun struct {
	r      *rig
	key    client.ObjectKey
	pw     string
	ids    []string
	before map[string]int
	asked  time.Time
	admin  *execute.Admin
	w      *redistest.Writer
}

func startAssignReceive(t *testing.T, r *rig) *assignRun {
	t.Helper()
	key, rc, pw := r.formed(t)
	loaded := time.Now()
	redistest.Preload(t, rc.Status.Nodes[0].Instance, pw, 1000000)
	t.Logf("preloaded 1,000,000 keys in %s", time.Since(loaded).Round(100*time.Millisecond))
	run := &assignRun{r: r, key: key, pw: pw, before: redistest.MasterSlots(rc), admin: execute.NewAdmin(pw, time.Second),
		w: redistest.StartWriter(rc.Status.Nodes[0].Instance, pw)}
	t.Cleanup(func() { _ = run.admin.Close() })
	for _, n := range rc.Status.Nodes {
		if n.Type == "master" {
			run.ids = append(run.ids, n.NodeID)
		}
	}
	redistest.PatchSpec(t, r.env.Client, key, fmt.Sprintf(`{"spec":{"replicas":8,"updateStrategy":{"type":"AssignReceive","pipeline":"1","assignStrategies":[{"slots":2000,"fromReplicas":"%s"},{"slots":900,"fromReplicas":"%s,%s"}]}}}`,
		run.ids[0], run.ids[1], run.ids[2]))
	run.asked = time.Now()
	return run
}

// moved is how many slots the new masters hold, per the status, and the nodes' addresses.
func (a *assignRun) moved(ctx context.Context) (int, []string) {
	cur := &redisv1alpha1.RedisCluster{}
	if err := a.r.env.Client.Get(ctx, a.key, cur); err != nil || len(cur.Status.AssignTargets) == 0 {
		return 0, nil
	}
	n := 0
	for _, id := range cur.Status.AssignTargets {
		n += redistest.MasterSlots(cur)[id]
	}
	return n, addrsOf(cur)
}

// waitForOpenSlots waits until some node has a slot open that inherited does not name: a
// batch of this process is under way. The new process first closes the inherited slots
// (Fix, a slot at a time, one key per MIGRATE: tens of seconds on a slow machine), so the
// wait allows 20 s from the last look that still found an inherited slot open, within
// 3 min in all. It reports whether one showed: false when the moves ended first, and the
// test fails when none shows while slots are left to move.
func (a *assignRun) waitForOpenSlots(t *testing.T, inherited map[string]bool) bool {
	t.Helper()
	_, addrs := a.moved(t.Context())
	start := time.Now()
	deadline := start.Add(20 * time.Second)
	for ; time.Now().Before(deadline) && time.Since(start) < 3*time.Minute; time.Sleep(20 * time.Millisecond) {
		fixing := false
		for _, o := range openSlots(t.Context(), a.admin, addrs) {
			if !inherited[slotOf(o)] {
				return true
			}
			fixing = true
		}
		if fixing {
			deadline = time.Now().Add(20 * time.Second)
		}
		if n, _ := a.moved(t.Context()); n >= 2900 {
			return false // the last batch ended between two looks: no kill follows (the caller sees the moves done)
		}
	}
	t.Errorf("no batch of slot moves was seen under way within %s (no slot open beyond the %d an earlier kill left): the kill that follows proves nothing",
		time.Since(start).Round(time.Second), len(inherited))
	return false
}

// slotOf is the slot number of an openSlots entry.
func slotOf(open string) string { slot, _, _ := strings.Cut(open, " "); return slot }

// finish waits for the shape and checks the new masters hold exactly the requested slots,
// no slot is open, the layout is whole and every acknowledged key reads back.
func (a *assignRun) finish(t *testing.T) {
	t.Helper()
	rc := redistest.WaitShape(t, a.r.env.Client, a.key, 4, 8)
	t.Logf("the scale out was done %s after it was asked for", time.Since(a.asked).Round(100*time.Millisecond))
	after := redistest.MasterSlots(rc)
	if got := a.before[a.ids[0]] - after[a.ids[0]]; got != 2000 {
		t.Errorf("%d slots moved from %s, want 2000", got, a.ids[0])
	}
	if got := a.before[a.ids[1]] + a.before[a.ids[2]] - after[a.ids[1]] - after[a.ids[2]]; got != 900 {
		t.Errorf("%d slots moved from %s and %s, want 900", got, a.ids[1], a.ids[2])
	}
	for id, n := range after {
		if a.before[id] == 0 && n != 2900 {
			t.Errorf("the new master %s has %d slots, want 2900", id, n)
		}
	}
	if open := openSlots(t.Context(), a.admin, addrsOf(rc)); len(open) > 0 {
		t.Errorf("slots still open at the end: %v", open)
	}
	redistest.CheckLayout(t, a.r.env.Client, a.key)
	redistest.CliCheck(t, rc.Status.Nodes[0].Instance, a.pw)
	a.w.Verify(t, a.r.env.Client, rc, a.pw)
}

// TestAPIServerGoneForAMinute stops kube-apiserver for 60 s under two operator replicas
// (the shipped Deployment's leader election: 15 s lease, 10 s renew deadline) while a
// RedisCluster runs with a writer. Redis does not need the API server: no key may be lost.
// The operator may not act on Redis from what it saw before (nothing broke, so no node's
// role, epoch or slots may change), a replica may give up leadership and exit once, never
// in a loop, and once the API server is back the operator works again: a scale out is
// carried out.
func TestAPIServerGoneForAMinute(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	var mu sync.Mutex
	ops := []*replica{r.operator(t), r.operator(t)}
	exits := make([]int, 2)
	// The kubelet's part: a container that exits is started again (restartPolicy Always).
	ctx, cancel := context.WithCancel(t.Context())
	var keeper sync.WaitGroup
	for i := range ops {
		keeper.Go(func() {
			for ctx.Err() == nil {
				mu.Lock()
				p := ops[i]
				mu.Unlock()
				_ = p.cmd.Wait()
				if ctx.Err() != nil {
					return
				}
				mu.Lock()
				exits[i]++
				t.Logf("operator replica %d exited (%v); starting it again", i, p.cmd.ProcessState)
				ops[i] = r.operator(t)
				mu.Unlock()
			}
		})
	}
	defer func() {
		cancel()
		mu.Lock()
		for _, p := range ops {
			_ = p.cmd.Process.Kill()
		}
		mu.Unlock()
		keeper.Wait()
	}()

	key, rc, pw := r.formed(t)
	w := redistest.StartWriter(rc.Status.Nodes[0].Instance, pw)
	admin := execute.NewAdmin(pw, time.Second)
	defer func() { _ = admin.Close() }()
	addrs := addrsOf(rc)
	time.Sleep(2 * time.Second)
	before := views(t.Context(), admin, addrs)
	if len(before) != 6 {
		t.Fatalf("%d of 6 nodes answered before the outage", len(before))
	}

	if err := r.env.Cluster.Halt("kube-apiserver"); err != nil {
		t.Fatal(err)
	}
	down := time.Now()
	time.Sleep(60 * time.Second)
	during := views(t.Context(), admin, addrs)
	if !maps.Equal(before, during) {
		t.Errorf("the topology changed while the API server was gone and nothing had failed:\nbefore %v\nafter  %v", before, during)
	}
	if err := r.env.Cluster.Resume("kube-apiserver"); err != nil {
		t.Fatal(err)
	}
	back := time.Now()
	t.Logf("the API server was gone for %s", back.Sub(down).Round(100*time.Millisecond))

	// The operator works again: it carries out a scale out.
	redistest.PatchSpec(t, r.env.Client, key, `{"spec":{"replicas":8}}`)
	testenv.Eventually(t, 3*time.Minute, func(ctx context.Context) (bool, string) {
		sts := &appsv1.StatefulSet{}
		if err := r.env.Client.Get(ctx, key, sts); err != nil {
			return false, err.Error()
		}
		return *sts.Spec.Replicas == 8, fmt.Sprintf("the StatefulSet asks for %d pods", *sts.Spec.Replicas)
	})
	t.Logf("the operator grew the StatefulSet %s after the API server came back", time.Since(back).Round(100*time.Millisecond))
	testenv.Eventually(t, 3*time.Minute, func(ctx context.Context) (bool, string) {
		pods := &corev1.PodList{}
		if err := r.env.Client.List(ctx, pods, client.InNamespace(key.Namespace)); err != nil {
			return false, err.Error()
		}
		running := 0
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning {
				running++
			}
		}
		return running == 8, fmt.Sprintf("%d of 8 pods Running", running)
	})
	t.Logf("8 pods Running %s after the API server came back", time.Since(back).Round(100*time.Millisecond))
	rc = redistest.WaitShape(t, r.env.Client, key, 4, 8)
	t.Logf("a scale out asked for after the API server came back was done %s later", time.Since(back).Round(100*time.Millisecond))
	mu.Lock()
	t.Logf("operator exits during the run: %v", exits)
	for i, n := range exits {
		if n > 1 {
			t.Errorf("operator replica %d exited %d times: it should give up leadership once at most, not loop", i, n)
		}
	}
	mu.Unlock()
	lease := &coordinationv1.Lease{}
	if err := r.env.Client.Get(t.Context(), client.ObjectKey{Namespace: "default", Name: leaseName}, lease); err != nil {
		t.Fatal(err)
	}
	t.Logf("lease holder %s, %d transitions", ptr.Deref(lease.Spec.HolderIdentity, "?"), ptr.Deref(lease.Spec.LeaseTransitions, 0))
	redistest.CheckLayout(t, r.env.Client, key)
	redistest.CliCheck(t, rc.Status.Nodes[0].Instance, pw)
	w.Verify(t, r.env.Client, rc, pw)
}

// TestOperatorDownWhileAMasterLosesItsVolume stops the operator, then a master loses its
// volume and comes back empty at the same address. Redis promotes the master's replica by
// itself; the empty pod must wait (its start guard needs the operator) rather than serve,
// so no replica syncs from it. Once an operator starts again, it sees the new topology and
// heals: the empty node rejoins as a replica, the layout is whole, and no key is lost.
func TestOperatorDownWhileAMasterLosesItsVolume(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	op := r.operator(t)
	key, rc, pw := r.formed(t)
	w := redistest.StartWriter(rc.Status.Nodes[0].Instance, pw)
	w.WaitWritten(t, 300)
	op.stop(t, syscall.SIGKILL)
	i := slices.IndexFunc(rc.Status.Nodes, func(n redisv1alpha1.RedisNode) bool { return n.Type == "master" })
	victim := rc.Status.Nodes[i]
	if err := r.kubelet.LoseData(key.Namespace, victim.Name); err != nil {
		t.Fatal(err)
	}
	lost := time.Now()
	// Redis fails over by itself within its node timeout (5 s); give it 20 s with no operator.
	admin := execute.NewAdmin(pw, time.Second)
	defer func() { _ = admin.Close() }()
	testenv.Eventually(t, 30*time.Second, func(ctx context.Context) (bool, string) {
		for _, n := range rc.Status.Nodes {
			if n.Type != "slave" || n.MasterNodeID != victim.NodeID {
				continue
			}
			nodes, err := admin.ClusterNodes(ctx, n.Instance)
			if err != nil {
				return false, fmt.Sprintf("%s, the replica of %s (%s): %v; its log: %s", n.Name, victim.Name, victim.Instance, err, r.kubelet.Log(key.Namespace, n.Name))
			}
			for _, m := range nodes {
				if m.Myself && m.IsMaster() {
					return true, ""
				}
			}
		}
		return false, "the lost master's replica is not promoted yet"
	})
	time.Sleep(10 * time.Second)
	t.Logf("the operator was down for %s after %s lost its data", time.Since(lost).Round(100*time.Millisecond), victim.Name)
	started := time.Now()
	r.operator(t)
	// The status still shows the cluster as it was before the operator stopped: wait for
	// the pod that came back empty to show under a new node id, as a replica.
	testenv.Eventually(t, 4*time.Minute, func(ctx context.Context) (bool, string) {
		cur := &redisv1alpha1.RedisCluster{}
		if err := r.env.Client.Get(ctx, key, cur); err != nil {
			return false, err.Error()
		}
		for _, n := range cur.Status.Nodes {
			if n.Name == victim.Name {
				return n.NodeID != victim.NodeID && n.Type == "slave", fmt.Sprintf("%s is a %s with id %s (phase %s: %s)", n.Name, n.Type, n.NodeID, cur.Status.Phase, cur.Status.Reason)
			}
		}
		return false, victim.Name + " is not in the status"
	})
	rc = redistest.WaitShape(t, r.env.Client, key, 3, 6)
	rc = redistest.CheckLayout(t, r.env.Client, key)
	t.Logf("healed %s after the operator started again", time.Since(started).Round(100*time.Millisecond))
	redistest.CliCheck(t, rc.Status.Nodes[0].Instance, pw)
	w.Verify(t, r.env.Client, rc, pw)
}

// TestOperatorKilledBetweenMeetAndReplicate: the operator dies right after it sent a
// joining node CLUSTER MEET and before CLUSTER REPLICATE (a crash point, so the kill lands
// there every run). The node is then an empty extra master that every node knows; the next
// operator must make it the replica the spec asks for, not a fourth master, and lose no key.
func TestOperatorKilledBetweenMeetAndReplicate(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	op := r.operator(t, crashpoint.Env+"="+crashpoint.JoinAfterMeet)
	key, rc, pw := r.formed(t)
	w := redistest.StartWriter(rc.Status.Nodes[0].Instance, pw)
	w.WaitWritten(t, 300)
	redistest.PatchSpec(t, r.env.Client, key, `{"spec":{"replicas":7}}`)
	op.waitCrash(t, "between MEET and REPLICATE")
	joining := rc.Name + "-6"
	addr := r.kubelet.Addr(key.Namespace, joining)
	admin := execute.NewAdmin(pw, time.Second)
	defer func() { _ = admin.Close() }()
	// What the dead operator left: the node was met (it learns the 6 others by gossip) and
	// is a master without slots.
	testenv.Eventually(t, 30*time.Second, func(ctx context.Context) (bool, string) {
		nodes, err := admin.ClusterNodes(ctx, addr)
		self := selves(ctx, admin, []string{addr})[addr]
		return err == nil && len(nodes) == 7 && self.IsMaster() && len(self.Slots) == 0,
			fmt.Sprintf("%s at %s knows %d nodes (%v); itself: %s", joining, addr, len(nodes), err, views(ctx, admin, []string{addr})[addr])
	})
	started := time.Now()
	r.operator(t)
	redistest.WaitShape(t, r.env.Client, key, 3, 7)
	rc = redistest.CheckLayout(t, r.env.Client, key)
	for _, n := range rc.Status.Nodes {
		if n.Name == joining && n.Type != "slave" {
			t.Errorf("%s is a %s, want a replica", joining, n.Type)
		}
	}
	t.Logf("the half-joined %s became a replica %s after a new operator started", joining, time.Since(started).Round(100*time.Millisecond))
	redistest.CliCheck(t, rc.Status.Nodes[0].Instance, pw)
	w.Verify(t, r.env.Client, rc, pw)
}

// waitCrash waits up to 2 minutes for the operator to end at its armed crash point (where
// names it for the failure) and fails the test unless it exited as that point makes it.
func (p *replica) waitCrash(t *testing.T, where string) {
	t.Helper()
	exited := make(chan struct{})
	go func() { _ = p.cmd.Wait(); close(exited) }()
	select {
	case <-exited:
	case <-time.After(2 * time.Minute):
		t.Fatalf("the operator never reached the crash point %s", where)
	}
	if code := p.cmd.ProcessState.ExitCode(); code != crashpoint.ExitCode {
		t.Fatalf("the operator exited with %d, want %d from the crash point", code, crashpoint.ExitCode)
	}
}
