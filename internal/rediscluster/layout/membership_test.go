package layout

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/middleware-operator/middleware-operator/internal/rediscluster/nodes"
)

// Node IDs in the form CLUSTER NODES prints them, the ones internal/rediscluster/nodes'
// tests use (a test package cannot be imported).
const id1, id2, id3, id5, id6 = "e7d1eecce10fd6bb5eb35b9f99a514335d9ba9ca", "67ed2db8d677e59ec4a4cefb06858cf2a1a89fa1",
	"292f8b365bb7edb5e285caf0b7e6ddc7265d2f4f", "6ec23923021cf3ffec47632106199cb7f496ce01", "824fe116063bc5fcf9f4ffd895bc17aee7731ac3"

func TestPlanAddNode(t *testing.T) {
	seed := nodes.Node{ID: id1, Addr: "10.0.0.1:6379", Host: "10.0.0.1", Port: 6379, BusPort: 16379, Role: nodes.RoleMaster, Myself: true,
		Slots: []nodes.SlotRange{{Start: 0, End: 16383}}}
	other := nodes.Node{ID: id2, Addr: "10.0.0.2:6379", Host: "10.0.0.2", Port: 6379, Role: nodes.RoleSlave, MasterID: id1}
	fresh := nodes.Node{ID: id3, Addr: "10.0.0.3:6379", Host: "10.0.0.3", Port: 6379, Role: nodes.RoleMaster, Myself: true}
	notMyself := func(n nodes.Node) nodes.Node { n.Myself = false; return n }
	tests := map[string]struct {
		cluster     []nodes.Node
		joining     NodeState
		asReplicaOf string
		want        AddNodePlan
		wantErr     string
	}{
		"empty master": {
			cluster: []nodes.Node{seed, other},
			joining: NodeState{View: []nodes.Node{fresh}},
			want:    AddNodePlan{ID: id3, Meet: true, MeetHost: "10.0.0.1", MeetPort: 6379},
		},
		"replica by address": {
			cluster: []nodes.Node{seed, other}, joining: NodeState{View: []nodes.Node{fresh}}, asReplicaOf: "10.0.0.1:6379",
			want: AddNodePlan{ID: id3, Meet: true, MeetHost: "10.0.0.1", MeetPort: 6379, Master: id1, Replicate: true},
		},
		"bus port not port+10000": {
			cluster: []nodes.Node{func() nodes.Node { s := seed; s.BusPort = 7000; return s }()},
			joining: NodeState{View: []nodes.Node{fresh}},
			want:    AddNodePlan{ID: id3, Meet: true, MeetHost: "10.0.0.1", MeetPort: 6379, MeetBusPort: 7000},
		},
		"already joined": {
			cluster: []nodes.Node{seed, other, notMyself(fresh)},
			joining: NodeState{View: []nodes.Node{fresh, notMyself(seed), other}},
			want:    AddNodePlan{ID: id3},
		},
		"already a replica": {
			cluster:     []nodes.Node{seed, other, func() nodes.Node { n := notMyself(fresh); n.Role, n.MasterID = nodes.RoleSlave, id1; return n }()},
			joining:     NodeState{View: []nodes.Node{func() nodes.Node { n := fresh; n.Role, n.MasterID = nodes.RoleSlave, id1; return n }(), notMyself(seed)}},
			asReplicaOf: id1,
			want:        AddNodePlan{ID: id3, Master: id1},
		},
		"holds keys": {
			cluster: []nodes.Node{seed}, joining: NodeState{View: []nodes.Node{fresh}, Keys: 3}, wantErr: "holds 3 keys",
		},
		"knows other nodes": {
			cluster: []nodes.Node{seed}, joining: NodeState{View: []nodes.Node{fresh, {ID: id5, Role: nodes.RoleMaster}}}, wantErr: "knows 1 other nodes",
		},
		"serves slots": {
			cluster: []nodes.Node{seed},
			joining: NodeState{View: []nodes.Node{func() nodes.Node { n := fresh; n.Slots = []nodes.SlotRange{{Start: 1, End: 1}}; return n }()}},
			wantErr: "it has slots",
		},
		"in another cluster": {
			cluster: []nodes.Node{seed, notMyself(fresh)},
			joining: NodeState{View: []nodes.Node{fresh, notMyself(seed), {ID: id6, Role: nodes.RoleMaster}}},
			wantErr: "not in the cluster",
		},
		"master is a replica": {
			cluster: []nodes.Node{seed, other}, joining: NodeState{View: []nodes.Node{fresh}}, asReplicaOf: id2, wantErr: "not a working master",
		},
		"unknown master": {
			cluster: []nodes.Node{seed}, joining: NodeState{View: []nodes.Node{fresh}}, asReplicaOf: id6, wantErr: "no such master",
		},
		"same node": {
			cluster: []nodes.Node{seed}, joining: NodeState{View: []nodes.Node{seed}}, wantErr: "same node",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := AddNode(tc.cluster, tc.joining, tc.asReplicaOf)
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
	if _, err := AddNode([]nodes.Node{seed}, NodeState{View: []nodes.Node{fresh}, Keys: 1}, ""); !errors.Is(err, ErrNodeNotEmpty) {
		t.Errorf("error = %v, want ErrNodeNotEmpty", err)
	}
}

func TestPlanDelNode(t *testing.T) {
	m := func(id string, slots bool, flags ...string) nodes.Node {
		n := nodes.Node{ID: id, Addr: id + ":1", Role: nodes.RoleMaster, Flags: flags}
		if slots {
			n.Slots = []nodes.SlotRange{{Start: 0, End: 1}}
		}
		n.Failed = slices.Contains(flags, "fail")
		return n
	}
	r := func(id, master string) nodes.Node {
		return nodes.Node{ID: id, Addr: id + ":1", Role: nodes.RoleSlave, MasterID: master}
	}
	tests := map[string]struct {
		cluster []nodes.Node
		node    string
		// want is "forget: ids; repoint: replica>master ..."
		want    string
		wantErr string
	}{
		"replica": {
			cluster: []nodes.Node{m("A", true), r("R", "A"), m("B", true)}, node: "R",
			want: "forget: A B; repoint:",
		},
		"empty master with replicas, by address": {
			cluster: []nodes.Node{m("A", true), r("RA", "A"), m("E", false), r("R1", "E"), r("R2", "E"), m("B", true), m("C", false), m("D", true, "fail")},
			node:    "E:1",
			// B has slots and no replica, then A and B have one each: A first in order.
			want: "forget: A RA R1 R2 B C D; repoint: R1>B R2>A",
		},
		"master with slots": {
			cluster: []nodes.Node{m("A", true), m("B", true)}, node: "B", wantErr: "reshard them away first",
		},
		"unknown": {
			cluster: []nodes.Node{m("A", true)}, node: "Z", wantErr: "no such node",
		},
		"no master left for its replica": {
			cluster: []nodes.Node{m("E", false), r("R", "E")}, node: "E", wantErr: "no working master",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			plan, err := DelNode(tc.cluster, tc.node)
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
