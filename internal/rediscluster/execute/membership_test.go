package execute

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/middleware-operator/middleware-operator/internal/rediscluster/layout"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/nodes"
)

func roleOf(ctx context.Context, t *testing.T, admin *Admin, addr string) nodes.Node {
	t.Helper()
	self, _, err := admin.Myself(ctx, addr)
	if err != nil {
		t.Fatal(err)
	}
	return self
}

// TestAddNodeFailoverDelNode adds a replica and fails over to it while a writer runs, then
// adds an empty master with a replica and deletes the master, whose replica must move to
// another master.
func TestAddNodeFailoverDelNode(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	servers := startServers(t, 6, "", "--repl-diskless-sync-delay", "0")
	admin := NewAdmin("", 2*time.Second)
	defer func() { _ = admin.Close() }()
	createCluster(ctx, t, admin, servers[:3], 0)
	entry := servers[1].addr
	m0, r0 := servers[0].addr, servers[3].addr
	w := startWriter(t, []string{entry}, "", 500)

	if err := admin.AddNode(ctx, r0, entry, m0); err != nil {
		t.Fatal(err)
	}
	oldMaster := roleOf(ctx, t, admin, m0)
	if self := roleOf(ctx, t, admin, r0); self.Role != nodes.RoleSlave || self.MasterID != oldMaster.ID {
		t.Fatalf("%s is %s of %q, want a replica of %s", r0, self.Role, self.MasterID, m0)
	}
	start := time.Now()
	if err := admin.Failover(ctx, r0); err != nil {
		t.Fatal(err)
	}
	t.Logf("failover to %s took %v", r0, time.Since(start).Round(time.Millisecond))
	promoted := roleOf(ctx, t, admin, r0)
	if !promoted.IsMaster() || nodes.FormatSlotRanges(promoted.Slots) != nodes.FormatSlotRanges(oldMaster.Slots) {
		t.Errorf("%s is %s with slots %s, want master of %s", r0, promoted.Role, nodes.FormatSlotRanges(promoted.Slots), nodes.FormatSlotRanges(oldMaster.Slots))
	}
	if err := admin.Failover(ctx, r0); err != nil {
		t.Errorf("Failover on a master: %v", err)
	}
	err := admin.Poll(ctx, "the old master to follow", func(ctx context.Context) (bool, string) {
		self := roleOf(ctx, t, admin, m0)
		return self.Role == nodes.RoleSlave && self.MasterID == promoted.ID, self.Role
	})
	if err != nil {
		t.Fatal(err)
	}

	// An empty master with a replica joins, and leaves again.
	e, re := servers[4].addr, servers[5].addr
	if err := admin.AddNode(ctx, e, entry, ""); err != nil {
		t.Fatal(err)
	}
	if err := admin.AddNode(ctx, re, entry, e); err != nil {
		t.Fatal(err)
	}
	if err := admin.AddNode(ctx, re, entry, e); err != nil {
		t.Fatalf("AddNode again: %v", err)
	}
	if err := admin.DelNode(ctx, entry, entry); err == nil {
		t.Error("DelNode of the node the cluster is reached through: want an error")
	}
	if err := admin.DelNode(ctx, entry, servers[2].addr); !errors.Is(err, layout.ErrNodeNotEmpty) {
		t.Errorf("DelNode of a master with slots: error = %v, want ErrNodeNotEmpty", err)
	}
	eID := roleOf(ctx, t, admin, e).ID
	if err := admin.DelNode(ctx, entry, eID); err != nil {
		t.Fatal(err)
	}
	moved := roleOf(ctx, t, admin, re)
	var newMaster nodes.Node
	res := waitCheck(ctx, t, admin, []string{entry}, "a healthy cluster without the empty master", func(r CheckResult) bool {
		return r.OK() && len(r.Nodes) == 5
	})
	for _, n := range res.Nodes {
		if n.ID == moved.MasterID {
			newMaster = n
		}
		if n.ID == eID {
			t.Errorf("%s is still in the cluster", e)
		}
	}
	if moved.Role != nodes.RoleSlave || !newMaster.IsMaster() || len(newMaster.Slots) == 0 {
		t.Errorf("%s replicates %q (%s), want a master with slots", re, moved.MasterID, newMaster.Addr)
	}
	if view, err := admin.ClusterNodes(ctx, e); err != nil || len(view) != 1 || view[0].ID == eID {
		t.Errorf("%s was not reset: %v, %v", e, view, err)
	}
	w.stopAndVerify(ctx, t)
	redisCliCheck(ctx, t, entry, "")
}
