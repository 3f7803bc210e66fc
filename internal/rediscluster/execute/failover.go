package execute

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/middleware-operator/middleware-operator/internal/rediscluster/nodes"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/observe"
)

// failoverRetry is how long Failover waits for a manual failover before asking again
// (Redis gives one up after 5 s).
const failoverRetry = 8 * time.Second

// Failover promotes the replica at replicaAddr the way an operator upgrading its master
// does: it waits until every master knows the node as a replica of its master (the master
// ignores a manual failover from a node it does not know as its replica, and the others
// would not vote for it), reads master_repl_offset in the master's INFO replication, waits until the
// replica's link is up and its slave_repl_offset has reached that offset, sends CLUSTER
// FAILOVER (the coordinated kind: the master stops its clients until the replica has
// caught up completely, so no acknowledged write is lost), and waits until the replica
// reports itself a master, asking again if Redis gave the failover up. Before it asks, it
// makes sure the masters would vote (awaitVotableEpoch). Every check reads the nodes afresh,
// so a caller whose deadline cuts a call short (a reconcile's step budget) goes on in the
// next call from where the nodes are.
//
// On a node that already is a master it does nothing. When ctx has no deadline it gives up
// after two minutes (defaultWaitTimeout).
func (a *Admin) Failover(ctx context.Context, replicaAddr string) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, defaultWaitTimeout)
		defer cancel()
	}
	self, view, err := a.Myself(ctx, replicaAddr)
	if err != nil {
		return fmt.Errorf("while failing over to %s: %w", replicaAddr, err)
	}
	if self.IsMaster() {
		return nil
	}
	var master *nodes.Node
	for i := range view {
		if view[i].ID == self.MasterID {
			master = &view[i]
		}
	}
	if master == nil || master.Host == "" {
		return fmt.Errorf("while failing over to %s: its master %s is not known", replicaAddr, self.MasterID)
	}
	// The master only starts a manual failover for a node it knows as its replica, and
	// the other masters only vote for one they know as a replica of that master.
	err = a.Poll(ctx, "every master to know "+replicaAddr+" as a replica of "+master.Addr, func(ctx context.Context) (bool, string) {
		for _, n := range voters(view) {
			other, err := a.ClusterNodes(ctx, n.Addr)
			if err != nil {
				return false, err.Error()
			}
			if !isReplicaOf(other, self.ID, master.ID) {
				return false, n.Addr + " does not know it as a replica yet"
			}
		}
		return true, ""
	})
	if err != nil {
		return fmt.Errorf("while failing over to %s: %w", replicaAddr, err)
	}
	if err := a.awaitVotableEpoch(ctx, replicaAddr, *master, view); err != nil {
		return fmt.Errorf("while failing over to %s: %w", replicaAddr, err)
	}
	info, err := a.replicationInfo(ctx, master.Addr)
	if err != nil {
		return fmt.Errorf("while failing over to %s: %w", replicaAddr, err)
	}
	target, err := strconv.ParseInt(info["master_repl_offset"], 10, 64)
	if err != nil {
		return fmt.Errorf("while failing over to %s: bad master_repl_offset %q of %s: %w", replicaAddr, info["master_repl_offset"], master.Addr, err)
	}
	err = a.Poll(ctx, replicaAddr+" to catch up with its master", func(ctx context.Context) (bool, string) {
		info, err := a.replicationInfo(ctx, replicaAddr)
		if err != nil {
			return false, err.Error()
		}
		if !observe.ReplicationInSync(info) {
			return false, "master_link_status:" + info["master_link_status"] + " master_sync_in_progress:" + info["master_sync_in_progress"]
		}
		offset, err := strconv.ParseInt(info["slave_repl_offset"], 10, 64)
		if err != nil {
			return false, "bad slave_repl_offset " + info["slave_repl_offset"]
		}
		return offset >= target, fmt.Sprintf("slave_repl_offset %d < master_repl_offset %d", offset, target)
	})
	if err != nil {
		return fmt.Errorf("while failing over to %s: %w", replicaAddr, err)
	}
	var asked time.Time
	err = a.Poll(ctx, replicaAddr+" to become a master", func(ctx context.Context) (bool, string) {
		self, _, err := a.Myself(ctx, replicaAddr)
		if err != nil {
			return false, err.Error()
		}
		if self.IsMaster() {
			return true, ""
		}
		if time.Since(asked) > failoverRetry {
			asked = time.Now()
			if err := a.Client(replicaAddr).Do(ctx, "CLUSTER", "FAILOVER").Err(); err != nil {
				return false, "CLUSTER FAILOVER: " + err.Error()
			}
		}
		return false, replicaAddr + " is still a replica"
	})
	if err != nil {
		return fmt.Errorf("while failing over to %s: %w", replicaAddr, err)
	}
	return nil
}

// replicationInfo returns the fields of INFO replication of the node at addr.
func (a *Admin) replicationInfo(ctx context.Context, addr string) (map[string]string, error) {
	text, err := a.Client(addr).Info(ctx, "replication").Result()
	if err != nil {
		return nil, fmt.Errorf("while running INFO replication on %s: %w", addr, err)
	}
	return nodes.ParseClusterInfo(text), nil
}

// awaitVotableEpoch waits until no master would refuse its vote to the replica at
// replicaAddr over the config epoch of its master. A master votes for a replica only if the
// epoch the replica advertises for its master (the one it knows) is at least the epoch the
// voter knows for the node serving those slots. Other nodes can credit a master with a
// higher epoch than it says of itself (they keep the highest they ever credited it with, and
// after pods came back at each other's old IPs Redis credits what answers at an address to the
// node it expected there, a replica's advertised epoch included), and its replica learns the
// smaller one from the master itself: every failover then fails for want of votes (seen in CI: 33 in a row over 4 minutes, each call
// cut short by the reconcile's 5 s budget). CLUSTER BUMPEPOCH on the master gives it a new
// highest epoch, which every node, the replica included, learns from its next ping; it is
// sent only while the master's own epoch is below what a voter knows of it, so a
// healthy cluster's epochs do not move. (The recovery recovery.ActionRaiseEpoch mends the
// same skew at any time, so Redis's own failover works; this covers a failover asked
// before the operator's next look.)
func (a *Admin) awaitVotableEpoch(ctx context.Context, replicaAddr string, master nodes.Node, view []nodes.Node) error {
	return a.Poll(ctx, "every master to know "+master.Addr+" by the config epoch its replica "+replicaAddr+" knows", func(ctx context.Context) (bool, string) {
		_, replicaView, err := a.Myself(ctx, replicaAddr)
		if err != nil {
			return false, err.Error()
		}
		asked := configEpochOf(replicaView, master.ID)
		own, highest, voter := int64(-1), int64(0), ""
		for _, n := range voters(view) {
			other, err := a.ClusterNodes(ctx, n.Addr)
			if err != nil {
				return false, err.Error()
			}
			known := configEpochOf(other, master.ID)
			if n.ID == master.ID {
				own = known
			}
			if known > highest {
				highest, voter = known, n.Addr
			}
		}
		if asked >= highest {
			return true, ""
		}
		if own >= 0 && own < highest {
			if err := a.Client(master.Addr).Do(ctx, "CLUSTER", "BUMPEPOCH").Err(); err != nil {
				return false, "CLUSTER BUMPEPOCH on " + master.Addr + ": " + err.Error()
			}
		}
		return false, fmt.Sprintf("%s knows its master by epoch %d, %s by %d (the master says %d of itself)", replicaAddr, asked, voter, highest, own)
	})
}

// configEpochOf is the config epoch view gives the node id, or -1 when view does not list it.
func configEpochOf(view []nodes.Node, id string) int64 {
	for _, n := range view {
		if n.ID == id {
			return n.ConfigEpoch
		}
	}
	return -1
}

// voters are the masters of view a failover asks for votes: those not failed, out of
// handshake and with an address.
func voters(view []nodes.Node) []nodes.Node {
	var out []nodes.Node
	for _, n := range view {
		if n.IsMaster() && !n.Failed && !n.HasFlag("handshake") && !n.HasFlag("noaddr") {
			out = append(out, n)
		}
	}
	return out
}
