package execute

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/middleware-operator/middleware-operator/internal/rediscluster/observe"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/recovery"
)

// staleMasterEpoch is a cluster of three masters where the first master's replica was
// added, then the master and the replica came back from nodes.conf files older than the
// master's last config epoch: the master says a smaller epoch of itself than the other
// masters know (the skew CI's external-access test met). It returns the admin, the
// servers, the master and its replica.
func staleMasterEpoch(ctx context.Context, t *testing.T) (*Admin, []*testServer, *testServer, *testServer) {
	t.Helper()
	servers := startServers(t, 4, "", "--repl-diskless-sync-delay", "0")
	admin := NewAdmin("", 2*time.Second)
	t.Cleanup(func() { _ = admin.Close() })
	createCluster(ctx, t, admin, servers[:3], 0)
	m0, r0 := servers[0], servers[3]
	if err := admin.AddNode(ctx, r0.addr, servers[1].addr, m0.addr); err != nil {
		t.Fatal(err)
	}
	confOf := func(s *testServer) string {
		return filepath.Join(filepath.Dir(s.logPath), "nodes-"+strconv.Itoa(s.port)+".conf")
	}
	epochOf := func(viewer *testServer, id string) int64 {
		_, view, err := admin.Myself(ctx, viewer.addr)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range view {
			if n.ID == id {
				return n.ConfigEpoch
			}
		}
		t.Fatalf("%s does not list %s", viewer.addr, id)
		return 0
	}
	master := roleOf(ctx, t, admin, m0.addr)
	// Both nodes.conf files as they are now, with the master's first epoch.
	var saved [2][]byte
	for i, s := range []*testServer{m0, r0} {
		b, err := os.ReadFile(confOf(s))
		if err != nil {
			t.Fatal(err)
		}
		saved[i] = b
	}
	old := epochOf(m0, master.ID)
	if err := admin.Client(m0.addr).Do(ctx, "CLUSTER", "BUMPEPOCH").Err(); err != nil {
		t.Fatal(err)
	}
	newer := epochOf(m0, master.ID)
	if err := admin.Poll(ctx, "the other masters to learn the bumped epoch", func(ctx context.Context) (bool, string) {
		return epochOf(servers[1], master.ID) == newer && epochOf(servers[2], master.ID) == newer, "not yet"
	}); err != nil {
		t.Fatal(err)
	}
	for i, s := range []*testServer{m0, r0} {
		_ = s.cmd.Process.Signal(syscall.SIGKILL)
		<-s.done
		if err := os.WriteFile(confOf(s), saved[i], 0o600); err != nil {
			t.Fatal(err)
		}
		s.restart(t, "")
	}
	if err := admin.Poll(ctx, "the replica to replicate again", func(ctx context.Context) (bool, string) {
		info, err := admin.replicationInfo(ctx, r0.addr)
		return err == nil && info["master_link_status"] == "up", "link " + info["master_link_status"]
	}); err != nil {
		t.Fatal(err)
	}
	stale, known := epochOf(m0, master.ID), epochOf(servers[1], master.ID)
	t.Logf("the master says epoch %d of itself (it had %d, then %d); another master knows %d; its replica %d", stale, old, newer, known, epochOf(r0, master.ID))
	if stale >= known {
		t.Fatalf("the staging did not make the master's epoch stale: %d against %d", stale, known)
	}
	return admin, servers, m0, r0
}

// TestFailoverPastAStaleMasterEpoch: a master and its replica come back from nodes.conf
// files older than the master's last config epoch (the shape CI's external-access test met
// during an upgrade: the master says epoch 1 of itself, the other masters know 4). The
// replica asks for votes with the stale epoch and the masters refuse them, so Redis gives
// every manual failover up; Failover bumps the master's epoch and the replica takes over.
func TestFailoverPastAStaleMasterEpoch(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	admin, _, _, r0 := staleMasterEpoch(ctx, t)
	// The reconciler calls Failover with a 5 s budget per step and calls it again on the
	// next reconcile: each call starts afresh, so what unblocks the votes must not depend on
	// an earlier call of the same Failover having waited.
	start, calls := time.Now(), 0
	for {
		calls++
		step, cancelStep := context.WithTimeout(ctx, 5*time.Second)
		err := admin.Failover(step, r0.addr)
		cancelStep()
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("after %d calls of 5 s each: %v", calls, err)
		}
	}
	t.Logf("failover to the replica of a master with a stale epoch took %s in %d calls of at most 5 s", time.Since(start).Round(time.Millisecond), calls)
	if self := roleOf(ctx, t, admin, r0.addr); !self.IsMaster() {
		t.Fatalf("%s is %s after Failover", r0.addr, self.Role)
	}
}

// TestRedisFailsOverAStaleEpochMasterOnceRecoveryRaisedIt: with the same skew, Redis's own
// failover of the master (killed) fails for want of votes, for as long as the skew lasts.
// The recovery (recovery.ActionRaiseEpoch, run here as the operator's looks run it) raises
// the master's epoch first; killed then, the master is replaced by its replica by Redis
// alone, within a few node timeouts (3 s here).
func TestRedisFailsOverAStaleEpochMasterOnceRecoveryRaisedIt(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	admin, servers, m0, r0 := staleMasterEpoch(ctx, t)
	look := func() (recovery.Action, bool) {
		obs := make([]observe.Observation, len(servers))
		for i, s := range servers {
			obs[i] = observe.Observation{Pod: "rc-" + strconv.Itoa(i), Addr: s.addr}
		}
		admin.Observe(ctx, obs)
		return recovery.Recover(observe.Snapshot{Nodes: obs, Masters: 3, ReplicasPerMaster: 0, NodeTimeout: 3 * time.Second, Now: time.Now(), Members: map[string]string{}})
	}
	// The restarts leave marks that gossip clears within a few node timeouts (a pfail or
	// fail flag on the restarted master, a link being set up), and the recovery acts on
	// those first: wait until the skew is the first thing it would mend, without acting on
	// the transient marks (acting could promote the replica and end the staging).
	lastReason := ""
	if err := admin.Poll(ctx, "the recovery to raise the epoch first", func(ctx context.Context) (bool, string) {
		a, ok := look()
		if ok && a.Kind == recovery.ActionRaiseEpoch {
			return true, ""
		}
		reason := "the recovery has nothing to do"
		if ok {
			reason = "the recovery would first: " + a.Message
		}
		if reason != lastReason {
			t.Logf("not yet: %s", reason)
			lastReason = reason
		}
		return false, reason
	}); err != nil {
		t.Fatal(err)
	}
	raised := 0
	for {
		a, ok := look()
		if !ok || a.Kind != recovery.ActionRaiseEpoch {
			break
		}
		if raised == 10 {
			t.Fatalf("the recovery still raises epochs after 10 looks: %s", a.Message)
		}
		t.Logf("look %d: %s", raised, a.Message)
		if err := admin.Run(ctx, a); err != nil {
			t.Fatal(err)
		}
		raised++
		time.Sleep(500 * time.Millisecond) // a look's interval at least; gossip carries the epoch
	}
	if raised == 0 {
		t.Fatal("the recovery never raised the master's epoch")
	}
	// Gossip carries the raised epoch to the replica within a ping or two; the master's
	// death comes later than that in life.
	if err := admin.Poll(ctx, "the replica to know its master's raised epoch", func(ctx context.Context) (bool, string) {
		self := roleOf(ctx, t, admin, m0.addr)
		_, view, err := admin.Myself(ctx, r0.addr)
		if err != nil {
			return false, err.Error()
		}
		known := configEpochOf(view, self.ID)
		return known == self.ConfigEpoch, fmt.Sprintf("the replica knows %d, the master says %d", known, self.ConfigEpoch)
	}); err != nil {
		t.Fatal(err)
	}
	_ = m0.cmd.Process.Signal(syscall.SIGKILL)
	<-m0.done
	start := time.Now()
	if err := admin.Poll(ctx, r0.addr+" to be promoted by Redis", func(ctx context.Context) (bool, string) {
		self := roleOf(ctx, t, admin, r0.addr)
		return self.IsMaster(), "still " + self.Role
	}); err != nil {
		t.Fatal(err)
	}
	t.Logf("Redis promoted the replica %s after its master was killed", time.Since(start).Round(time.Millisecond))
}
