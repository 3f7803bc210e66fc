package recovery

import (
	"slices"
	"testing"

	"github.com/middleware-operator/middleware-operator/internal/rediscluster/conn"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/nodes"
	"github.com/middleware-operator/middleware-operator/tests/fakesnapshot"
)

// epochs gives the masters aaaaaaaa, bbbbbbbb, cccccccc the config epochs 1, 2, 3 in every
// view and each replica its master's, as a healthy cluster shows them.
func epochs() *fakesnapshot.Cluster {
	c := fakesnapshot.Six()
	for id, e := range map[string]int64{"aaaaaaaa": 1, "bbbbbbbb": 2, "cccccccc": 3, "dddddddd": 1, "eeeeeeee": 2, "ffffffff": 3} {
		c.Each(id, func(n *nodes.Node) { n.ConfigEpoch = e })
	}
	return c
}

// recordAt makes viewer's view credit node id with epoch.
func recordAt(c *fakesnapshot.Cluster, viewer int, id string, epoch int64) *fakesnapshot.Cluster {
	for j := range c.Snap.Nodes[viewer].View {
		if v := &c.Snap.Nodes[viewer].View[j]; v.ID == id {
			v.ConfigEpoch = epoch
		}
	}
	return c
}

func bumpAt(addrs ...int) []conn.Command {
	var out []conn.Command
	for _, i := range addrs {
		out = append(out, conn.Command{Addr: fakesnapshot.Addr(i), Args: []string{"CLUSTER", "BUMPEPOCH"}})
	}
	return out
}

// TestPlanVotableEpochs: a master is bumped exactly when a node credits it with a higher
// epoch than it says of itself (what makes the masters refuse its replicas' votes).
func TestPlanVotableEpochs(t *testing.T) {
	for name, tc := range map[string]struct {
		c    *fakesnapshot.Cluster
		want []conn.Command
	}{
		"healthy epochs":                      {c: epochs()},
		"all epochs zero (a cluster forming)": {c: fakesnapshot.Six()},
		// CI's external-access test: two masters credit rc-0's master with the epoch of a
		// replica that answered at its old address.
		"other masters know a higher epoch": {c: recordAt(recordAt(epochs(), 1, "aaaaaaaa", 3), 2, "aaaaaaaa", 3), want: bumpAt(0)},
		"only a replica knows a higher one": {c: recordAt(epochs(), 4, "aaaaaaaa", 3), want: bumpAt(0)},
		// Each of the two sees a higher epoch than its own (cccccccc's 3), so each bump
		// raises it without a helper.
		"two skewed masters, each bumped":   {c: recordAt(recordAt(epochs(), 2, "aaaaaaaa", 3), 0, "bbbbbbbb", 3), want: bumpAt(0, 1)},
		"a master without slots is left":    {c: recordAt(epochs().Each("aaaaaaaa", func(n *nodes.Node) { n.Slots = nil }), 1, "aaaaaaaa", 3)},
		"a lower record is stale, not skew": {c: recordAt(epochs(), 1, "cccccccc", 1)},
		// aaaaaaaa is back from the dead still claiming its slots in its own view, which
		// every other view routes to its promoted replica: raising it would hand them back.
		"not while a slot is open": {c: recordAt(epochs().Each("bbbbbbbb", func(n *nodes.Node) {
			if n.Myself {
				n.Migrating = map[int]string{5461: "cccccccc"}
			}
		}), 1, "aaaaaaaa", 3)},
		"an old master whose slots others route elsewhere": {c: recordAt(epochs().Promote("dddddddd", "aaaaaaaa"), 1, "aaaaaaaa", 3)},
	} {
		t.Run(name, func(t *testing.T) {
			a, ok := planVotableEpochs(tc.c.Snap)
			if ok != (tc.want != nil) || !slices.EqualFunc(a.Commands, tc.want, func(x, y conn.Command) bool {
				return x.Addr == y.Addr && slices.Equal(x.Args, y.Args)
			}) {
				t.Fatalf("got %v %v (%s), want %v", ok, a.Commands, a.Message, tc.want)
			}
			if ok && a.Kind != ActionRaiseEpoch {
				t.Errorf("kind %s, want %s", a.Kind, ActionRaiseEpoch)
			}
			if r, _ := Recover(tc.c.Snap); ok && r.Kind != ActionRaiseEpoch {
				t.Errorf("Recover chose %s (%s), want %s", r.Kind, r.Message, ActionRaiseEpoch)
			}
		})
	}
}

// TestPlanVotableEpochsRaisesTheClusterFirstWhenTheMasterKnowsNoHigher: a skewed master that
// sees no higher epoch than its own in its view would answer BUMPEPOCH with STILL, so another
// master bumps first.
func TestPlanVotableEpochsRaisesTheClusterFirstWhenTheMasterKnowsNoHigher(t *testing.T) {
	c := epochs()
	c.Each("cccccccc", func(n *nodes.Node) { n.ConfigEpoch = 1 }).Each("ffffffff", func(n *nodes.Node) { n.ConfigEpoch = 1 })
	c.Each("bbbbbbbb", func(n *nodes.Node) { n.ConfigEpoch = 1 }).Each("eeeeeeee", func(n *nodes.Node) { n.ConfigEpoch = 1 })
	c = recordAt(c, 1, "cccccccc", 2) // rc-2 says 1 of itself and sees nothing above 1
	a, ok := planVotableEpochs(c.Snap)
	if !ok || len(a.Commands) != 2 || a.Commands[1].Addr != fakesnapshot.Addr(2) || a.Commands[0].Addr == fakesnapshot.Addr(2) {
		t.Fatalf("got %v %v, want a BUMPEPOCH on another master, then on %s", ok, a.Commands, fakesnapshot.Addr(2))
	}
}
