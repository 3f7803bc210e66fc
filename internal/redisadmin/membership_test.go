package redisadmin

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

// Node IDs in the form CLUSTER NODES prints them, the ones internal/rediscluster/nodes'
// tests use (a test package cannot be imported).
const id1, id2, id3, id5, id6 = "e7d1eecce10fd6bb5eb35b9f99a514335d9ba9ca", "67ed2db8d677e59ec4a4cefb06858cf2a1a89fa1",
	"292f8b365bb7edb5e285caf0b7e6ddc7265d2f4f", "6ec23923021cf3ffec47632106199cb7f496ce01", "824fe116063bc5fcf9f4ffd895bc17aee7731ac3"

func TestPlanAddNode(t *testing.T) {
	seed := Node{ID: id1, Addr: "10.0.0.1:6379", Host: "10.0.0.1", Port: 6379, BusPort: 16379, Role: RoleMaster, Myself: true,
		Slots: []SlotRange{{Start: 0, End: 16383}}}
	other := Node{ID: id2, Addr: "10.0.0.2:6379", Host: "10.0.0.2", Port: 6379, Role: RoleSlave, MasterID: id1}
	fresh := Node{ID: id3, Addr: "10.0.0.3:6379", Host: "10.0.0.3", Port: 6379, Role: RoleMaster, Myself: true}
	notMyself := func(n Node) Node { n.Myself = false; return n }
	tests := map[string]struct {
		cluster     []Node
		joining     NodeState
		asReplicaOf string
		want        AddNodePlan
		wantErr     string
	}{
		"empty master": {
			cluster: []Node{seed, other},
			joining: NodeState{View: []Node{fresh}},
			want:    AddNodePlan{ID: id3, Meet: true, MeetHost: "10.0.0.1", MeetPort: 6379},
		},
		"replica by address": {
			cluster: []Node{seed, other}, joining: NodeState{View: []Node{fresh}}, asReplicaOf: "10.0.0.1:6379",
			want: AddNodePlan{ID: id3, Meet: true, MeetHost: "10.0.0.1", MeetPort: 6379, Master: id1, Replicate: true},
		},
		"bus port not port+10000": {
			cluster: []Node{func() Node { s := seed; s.BusPort = 7000; return s }()},
			joining: NodeState{View: []Node{fresh}},
			want:    AddNodePlan{ID: id3, Meet: true, MeetHost: "10.0.0.1", MeetPort: 6379, MeetBusPort: 7000},
		},
		"already joined": {
			cluster: []Node{seed, other, notMyself(fresh)},
			joining: NodeState{View: []Node{fresh, notMyself(seed), other}},
			want:    AddNodePlan{ID: id3},
		},
		"already a replica": {
			cluster:     []Node{seed, other, func() Node { n := notMyself(fresh); n.Role, n.MasterID = RoleSlave, id1; return n }()},
			joining:     NodeState{View: []Node{func() Node { n := fresh; n.Role, n.MasterID = RoleSlave, id1; return n }(), notMyself(seed)}},
			asReplicaOf: id1,
			want:        AddNodePlan{ID: id3, Master: id1},
		},
		"holds keys": {
			cluster: []Node{seed}, joining: NodeState{View: []Node{fresh}, Keys: 3}, wantErr: "holds 3 keys",
		},
		"knows other nodes": {
			cluster: []Node{seed}, joining: NodeState{View: []Node{fresh, {ID: id5, Role: RoleMaster}}}, wantErr: "knows 1 other nodes",
		},
		"serves slots": {
			cluster: []Node{seed},
			joining: NodeState{View: []Node{func() Node { n := fresh; n.Slots = []SlotRange{{Start: 1, End: 1}}; return n }()}},
			wantErr: "it has slots",
		},
		"in another cluster": {
			cluster: []Node{seed, notMyself(fresh)},
			joining: NodeState{View: []Node{fresh, notMyself(seed), {ID: id6, Role: RoleMaster}}},
			wantErr: "not in the cluster",
		},
		"master is a replica": {
			cluster: []Node{seed, other}, joining: NodeState{View: []Node{fresh}}, asReplicaOf: id2, wantErr: "not a working master",
		},
		"unknown master": {
			cluster: []Node{seed}, joining: NodeState{View: []Node{fresh}}, asReplicaOf: id6, wantErr: "no such master",
		},
		"same node": {
			cluster: []Node{seed}, joining: NodeState{View: []Node{seed}}, wantErr: "same node",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := planAddNode(tc.cluster, tc.joining, tc.asReplicaOf)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("plan = %+v, want %+v", got, tc.want)
			}
		})
	}
	if _, err := planAddNode([]Node{seed}, NodeState{View: []Node{fresh}, Keys: 1}, ""); !errors.Is(err, ErrNodeNotEmpty) {
		t.Errorf("error = %v, want ErrNodeNotEmpty", err)
	}
}

func TestPlanDelNode(t *testing.T) {
	m := func(id string, slots bool, flags ...string) Node {
		n := Node{ID: id, Addr: id + ":1", Role: RoleMaster, Flags: flags}
		if slots {
			n.Slots = []SlotRange{{Start: 0, End: 1}}
		}
		n.Failed = slices.Contains(flags, "fail")
		return n
	}
	r := func(id, master string) Node { return Node{ID: id, Addr: id + ":1", Role: RoleSlave, MasterID: master} }
	tests := map[string]struct {
		cluster []Node
		node    string
		// want is "forget: ids; repoint: replica>master ..."
		want    string
		wantErr string
	}{
		"replica": {
			cluster: []Node{m("A", true), r("R", "A"), m("B", true)}, node: "R",
			want: "forget: A B; repoint:",
		},
		"empty master with replicas, by address": {
			cluster: []Node{m("A", true), r("RA", "A"), m("E", false), r("R1", "E"), r("R2", "E"), m("B", true), m("C", false), m("D", true, "fail")},
			node:    "E:1",
			// B has slots and no replica, then A and B have one each: A first in order.
			want: "forget: A RA R1 R2 B C D; repoint: R1>B R2>A",
		},
		"master with slots": {
			cluster: []Node{m("A", true), m("B", true)}, node: "B", wantErr: "reshard them away first",
		},
		"unknown": {
			cluster: []Node{m("A", true)}, node: "Z", wantErr: "no such node",
		},
		"no master left for its replica": {
			cluster: []Node{m("E", false), r("R", "E")}, node: "E", wantErr: "no working master",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			plan, err := planDelNode(tc.cluster, tc.node)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var forget, repoint []string
			for _, n := range plan.Forget {
				forget = append(forget, n.ID)
			}
			for _, rp := range plan.Repoint {
				repoint = append(repoint, rp.Replica.ID+">"+rp.Master)
			}
			got := strings.TrimSpace("forget: " + strings.Join(forget, " ") + "; repoint: " + strings.Join(repoint, " "))
			if got != tc.want {
				t.Errorf("plan = %q, want %q", got, tc.want)
			}
		})
	}
}

// roleOf returns how the node at addr describes itself.
func roleOf(ctx context.Context, t *testing.T, admin *Admin, addr string) Node {
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
	if self := roleOf(ctx, t, admin, r0); self.Role != RoleSlave || self.MasterID != oldMaster.ID {
		t.Fatalf("%s is %s of %q, want a replica of %s", r0, self.Role, self.MasterID, m0)
	}
	start := time.Now()
	if err := admin.Failover(ctx, r0); err != nil {
		t.Fatal(err)
	}
	t.Logf("failover to %s took %v", r0, time.Since(start).Round(time.Millisecond))
	promoted := roleOf(ctx, t, admin, r0)
	if !promoted.IsMaster() || FormatSlotRanges(promoted.Slots) != FormatSlotRanges(oldMaster.Slots) {
		t.Errorf("%s is %s with slots %s, want master of %s", r0, promoted.Role, FormatSlotRanges(promoted.Slots), FormatSlotRanges(oldMaster.Slots))
	}
	if err := admin.Failover(ctx, r0); err != nil {
		t.Errorf("Failover on a master: %v", err)
	}
	err := admin.Poll(ctx, "the old master to follow", func(ctx context.Context) (bool, string) {
		self := roleOf(ctx, t, admin, m0)
		return self.Role == RoleSlave && self.MasterID == promoted.ID, self.Role
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
	if err := admin.DelNode(ctx, entry, servers[2].addr); !errors.Is(err, ErrNodeNotEmpty) {
		t.Errorf("DelNode of a master with slots: error = %v, want ErrNodeNotEmpty", err)
	}
	eID := roleOf(ctx, t, admin, e).ID
	if err := admin.DelNode(ctx, entry, eID); err != nil {
		t.Fatal(err)
	}
	moved := roleOf(ctx, t, admin, re)
	var newMaster Node
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
	if moved.Role != RoleSlave || !newMaster.IsMaster() || len(newMaster.Slots) == 0 {
		t.Errorf("%s replicates %q (%s), want a master with slots", re, moved.MasterID, newMaster.Addr)
	}
	if view, err := admin.ClusterNodes(ctx, e); err != nil || len(view) != 1 || view[0].ID == eID {
		t.Errorf("%s was not reset: %v, %v", e, view, err)
	}
	w.stopAndVerify(ctx, t)
	redisCliCheck(ctx, t, entry, "")
}
