package recovery

import (
	"cmp"
	"fmt"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/middleware-operator/middleware-operator/internal/rediscluster/conn"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/nodes"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/observe"
)

// ActionKind names what a recovery does; it is also the reason of the event that reports it.
type ActionKind string

// The recoveries Recover chooses from, in the order it considers them.
const (
	// ActionMeet introduces members to each other at their current addresses.
	ActionMeet ActionKind = "NodesReintroduced"
	// ActionRepoint points a replica whose master is gone or emptied at a live master.
	ActionRepoint ActionKind = "ReplicaRepointed"
	// ActionForceFailover promotes the most caught-up replica of a dead master that Redis
	// did not promote by itself (CLUSTER FAILOVER FORCE).
	ActionForceFailover ActionKind = "FailoverForced"
	// ActionTakeover is a forced failover without the other masters' agreement, used only
	// when a majority of masters is lost (CLUSTER FAILOVER TAKEOVER).
	ActionTakeover ActionKind = "FailoverTakeover"
	// ActionRoute makes every node route a slot to the one master that serves it.
	ActionRoute ActionKind = "SlotRouted"
	// ActionForget removes a node ID that no pod answers to any more from every node.
	ActionForget ActionKind = "GhostForgotten"
	// ActionDemote makes a master beyond the spec's count, emptied of slots, a replica.
	ActionDemote ActionKind = "MasterDemoted"
	// ActionBalanceReplicas moves a replica from the master with the most to the one with
	// the fewest.
	ActionBalanceReplicas ActionKind = "ReplicaMoved"
	// ActionSeparate swaps the masters of two replicas so that neither shares a Kubernetes
	// node with its master.
	ActionSeparate ActionKind = "ReplicasSeparated"
	// ActionRaiseEpoch raises the config epoch of a master that says a smaller one of itself
	// than other nodes know of it, so that its replicas can win a failover's votes.
	ActionRaiseEpoch ActionKind = "EpochRaised"
	// ActionCover gives slots no master serves, and no master holds keys in, to a master.
	ActionCover ActionKind = "SlotsCovered"
	// ActionAbandon forgets the masters of lost shards once the user accepted the loss
	// (Abandon; never chosen by Recover).
	ActionAbandon ActionKind = "LostShardForgotten"
)

// Action is one recovery: commands run in order, and a message for the event (no key, no
// value, no password).
type Action struct {
	Kind     ActionKind
	Commands []conn.Command
	Message  string
}

// Grace periods, in units of the node timeout: a failed master is promoted over by force
// only after Redis had the time to fail over by itself; a failed node is forgotten only
// after every node had the time to flag it.
const (
	forceFailoverAfter = 3
	forgetAfter        = 2
)

// Recover decides the next recovery of s, or returns false when the topology needs
// none. It is pure: it reads only s. The order matters: members must know each other
// before anything else can be judged; a dead master's slots come before tidiness; layout
// changes (demotions, replica moves) only while every slot owner is alive.
func Recover(s observe.Snapshot) (Action, bool) {
	for _, plan := range []func(observe.Snapshot) (Action, bool){
		Meet, planRepoint, planStaleMasterAddress, planFailover, planRoute, planCover, planForget, planDemote, planBalanceReplicas, planSeparate,
		planVotableEpochs,
	} {
		if a, ok := plan(s); ok {
			return a, true
		}
	}
	return Action{}, false
}

// Meet introduces members to each other (ActionMeet): every joined member must list every
// other joined member at its current address, without noaddr or handshake, from its own
// view (not only the lowest address's: gossip alone leaves noaddr entries after every pod
// moved).
func Meet(s observe.Snapshot) (Action, bool) {
	joined := s.Joined()
	var cmds []conn.Command
	first := ""
	for _, a := range joined {
		for _, b := range joined {
			bself, _ := b.Self()
			if a == b || knowsAt(a.View, bself.ID, b.Addr) {
				continue
			}
			host, port, err := net.SplitHostPort(b.Addr)
			if err != nil {
				continue
			}
			if first == "" {
				first = fmt.Sprintf("; first: %s lists %s (%s) as %s", a.Pod, b.Pod, b.Addr, viewEntry(a.View, bself.ID))
			}
			cmds = append(cmds, conn.Command{Addr: a.Addr, Args: []string{"CLUSTER", "MEET", host, port}})
		}
	}
	if len(cmds) == 0 {
		return Action{}, false
	}
	return Action{ActionMeet, cmds, fmt.Sprintf("sent %d CLUSTER MEET so every member knows every other at its current address%s", len(cmds), first)}, true
}

// viewEntry says how view lists node id: its address and flags, or that it is missing (for
// the reason of a MEET: a MEET that does not stick shows why in the status).
func viewEntry(view []nodes.Node, id string) string {
	for _, n := range view {
		if n.ID == id {
			return fmt.Sprintf("%s [%s]", cmp.Or(n.Addr, "no address"), strings.Join(n.Flags, ","))
		}
	}
	return "missing"
}

// knowsAt reports whether view lists node id at addr, with a live address.
func knowsAt(view []nodes.Node, id, addr string) bool {
	for _, n := range view {
		if n.ID == id {
			return n.Addr == addr && !n.HasFlag("noaddr") && !n.HasFlag("handshake")
		}
	}
	return false
}

// replicaLayout is the replication layout of the answering, staying members.
type replicaLayout struct {
	masters  []*observe.Observation            // the masters that serve or are about to serve slots
	replicas map[string][]*observe.Observation // by master ID
}

func newReplicaLayout(s *observe.Snapshot) replicaLayout {
	l := replicaLayout{replicas: map[string][]*observe.Observation{}}
	serving := 0
	var empty []*observe.Observation
	for _, o := range s.Joined() {
		self, _ := o.Self()
		if o.Leaving || !self.IsMaster() || self.Failed {
			continue
		}
		if len(self.Slots) > 0 {
			l.masters = append(l.masters, o)
			serving++
		} else {
			empty = append(empty, o)
		}
	}
	// Empty masters are kept while the spec needs more masters (new ones waiting for slots).
	for _, o := range empty {
		if serving < s.Masters {
			l.masters = append(l.masters, o)
			serving++
		}
	}
	for _, o := range s.Joined() {
		self, _ := o.Self()
		if !o.Leaving && self.Role == nodes.RoleSlave {
			l.replicas[self.MasterID] = append(l.replicas[self.MasterID], o)
		}
	}
	return l
}

func (l replicaLayout) isMaster(id string) bool {
	return slices.ContainsFunc(l.masters, func(o *observe.Observation) bool { self, _ := o.Self(); return self.ID == id })
}

// fewest is the master with the fewest replicas, preferring one in another failure domain
// than o, then the lowest ordinal; nil when there is none.
func (l replicaLayout) fewest(o *observe.Observation, except string) *observe.Observation {
	var best *observe.Observation
	for _, m := range l.masters {
		id := observe.SelfID(m)
		if id == except {
			continue
		}
		if best == nil {
			best = m
			continue
		}
		a, b := len(l.replicas[id]), len(l.replicas[observe.SelfID(best)])
		if a != b {
			if a < b {
				best = m
			}
			continue
		}
		if o != nil && sameDomain(best, o) && !sameDomain(m, o) {
			best = m
		}
	}
	return best
}

// sameDomain reports whether two pods share a Kubernetes node, or a zone when both know it.
func sameDomain(a, b *observe.Observation) bool {
	return (a.Host != "" && a.Host == b.Host) || (a.Zone != "" && a.Zone == b.Zone)
}

func replicate(replica *observe.Observation, master string) conn.Command {
	return conn.Command{Addr: replica.Addr, Args: []string{"CLUSTER", "REPLICATE", master}}
}

// planRepoint: a replica whose master is unknown, not a master, emptied beyond the spec's
// count, or failed without slots (its replicas were not taken over) replicates the live
// master with the fewest replicas instead. A replica of a failed master that still owns
// slots is left alone: it is the master's successor.
func planRepoint(s observe.Snapshot) (Action, bool) {
	l := newReplicaLayout(&s)
	cluster := map[string]*observe.Known{}
	for _, k := range s.Cluster() {
		cluster[k.Node.ID] = k
	}
	for _, o := range s.Joined() {
		self, _ := o.Self()
		if o.Leaving || self.Role != nodes.RoleSlave || l.isMaster(self.MasterID) {
			continue
		}
		if k := cluster[self.MasterID]; k != nil && k.Node.IsMaster() && len(k.Slots) > 0 {
			continue // a dead master with slots: failed over, not abandoned
		}
		if k := cluster[self.MasterID]; k != nil && k.Answers != nil && k.Answers.Leaving {
			continue // removed with its master by scale in
		}
		m := l.fewest(o, "")
		if m == nil {
			return Action{}, false
		}
		return Action{ActionRepoint, []conn.Command{replicate(o, observe.SelfID(m))},
			fmt.Sprintf("%s replicated %s, which is gone or no longer a master: it now replicates %s", o.Pod, nodes.ShortID(self.MasterID), m.Pod)}, true
	}
	return Action{}, false
}

// planStaleMasterAddress: a replica whose replication still dials its master's old address
// (INFO replication's master_host:master_port), while its master answers at another one, is
// pointed at its master again (linked or not: a pod may have taken the old address) (CLUSTER REPLICATE, which dials the address
// its view now has). Redis 7.0 updates the address a replica replicates from only when it
// hears from the master itself at the new address, not when gossip brings it (seen after
// every pod came back at new IPs: a replica dialing a gone IP for good, its master with no
// replica). Meet ran first, so the replica's view has the current address.
func planStaleMasterAddress(s observe.Snapshot) (Action, bool) {
	answering := s.ByID()
	for _, o := range s.Joined() {
		self, _ := o.Self()
		host, port := o.Replication["master_host"], o.Replication["master_port"]
		if o.Leaving || self.Role != nodes.RoleSlave || host == "" || port == "" {
			continue
		}
		m := answering[self.MasterID]
		if m == nil || m.Addr == "" {
			continue
		}
		if mself, _ := m.Self(); !mself.IsMaster() {
			continue
		}
		if dials := net.JoinHostPort(host, port); dials != m.Addr {
			return Action{ActionRepoint, []conn.Command{replicate(o, self.MasterID)},
				fmt.Sprintf("%s replicates %s (%s) at %s, an address it left: it answers at %s now", o.Pod, nodes.ShortID(self.MasterID), m.Pod, dials, m.Addr)}, true
		}
	}
	return Action{}, false
}

// planFailover: a master that owns slots, is flagged fail, and has not been heard of for
// forceFailoverAfter node timeouts, was not replaced by Redis (its replicas may have
// cluster-replica-no-failover, or lost the election): its most caught-up answering replica
// that ever synced (a replication offset above 0) takes over with CLUSTER FAILOVER FORCE, or TAKEOVER when a majority of the slot-owning
// masters is dead and no election can win.
func planFailover(s observe.Snapshot) (Action, bool) {
	cluster := s.Cluster()
	owners, dead := 0, 0
	for _, k := range cluster {
		if k.Node.IsMaster() && len(k.Slots) > 0 {
			owners++
			if k.Failed && k.Answers == nil {
				dead++
			}
		}
	}
	for _, k := range cluster {
		if !k.Node.IsMaster() || len(k.Slots) == 0 || !k.Failed || k.Answers != nil ||
			s.SilentFor(k) < forceFailoverAfter*s.NodeTimeout {
			continue
		}
		best := promotable(s, k.Node.ID)
		if best == nil {
			continue // nothing to promote: the status reports the slots as not served (LostShards)
		}
		kind, mode := ActionForceFailover, "FORCE"
		if dead*2 >= owners {
			kind, mode = ActionTakeover, "TAKEOVER"
		}
		msg := fmt.Sprintf("master %s (%s) has been down for %s and no replica took over: %s promoted with CLUSTER FAILOVER %s",
			nodes.ShortID(k.Node.ID), k.Node.Addr, s.SilentFor(k).Round(time.Second), best.Pod, mode)
		if kind == ActionTakeover {
			msg += fmt.Sprintf(" (%d of %d masters are down, so no election can win)", dead, owners)
		}
		return Action{kind, []conn.Command{{Addr: best.Addr, Args: []string{"CLUSTER", "FAILOVER", mode}}}, msg}, true
	}
	return Action{}, false
}

// planForget: a node ID that no pod answers to and that owns no slot, silent for
// forgetAfter node timeouts, is forgotten by every node that lists it, when the cluster
// agrees it is gone: flagged fail, or listed without an address, or listed by a minority of
// the members only (the rest forgot it; a member that was away while they did brought it
// back from its nodes.conf, and a single node can never flag it fail). That is a pod that
// came back with an empty volume, a pod removed behind the operator's back. Its replicas
// were re-pointed first (a replica refuses to forget its master).
func planForget(s observe.Snapshot) (Action, bool) {
	joined := len(s.Joined())
	for _, k := range s.Cluster() {
		if k.Answers != nil || len(k.Slots) > 0 || s.SilentFor(k) < forgetAfter*s.NodeTimeout {
			continue
		}
		if !k.Failed && !k.Node.HasFlag("noaddr") && k.ListedBy*2 > joined {
			continue
		}
		var cmds []conn.Command
		for _, o := range s.Joined() {
			self, _ := o.Self()
			if self.MasterID == k.Node.ID {
				cmds = nil // wait until planRepoint moved it
				break
			}
			if slices.ContainsFunc(o.View, func(n nodes.Node) bool { return n.ID == k.Node.ID }) {
				cmds = append(cmds, conn.Command{Addr: o.Addr, Args: []string{"CLUSTER", "FORGET", k.Node.ID}})
			}
		}
		if len(cmds) == 0 {
			continue
		}
		return Action{ActionForget, cmds, fmt.Sprintf("forgot node %s (last at %s): no pod has answered with its ID for %s",
			nodes.ShortID(k.Node.ID), k.Node.Addr, s.SilentFor(k).Round(time.Second))}, true
	}
	return Action{}, false
}

// layoutStable reports whether layout changes are safe: every slot-owning master answers.
func layoutStable(s *observe.Snapshot) bool {
	for _, k := range s.Cluster() {
		if k.Node.IsMaster() && len(k.Slots) > 0 && (k.Answers == nil || k.Failed) {
			return false
		}
	}
	return len(s.Joined()) > 0
}

// planDemote: a staying master without slots, beyond the masters the spec needs (for
// example one emptied by a scale in), becomes a replica of the master with the fewest.
func planDemote(s observe.Snapshot) (Action, bool) {
	if !layoutStable(&s) {
		return Action{}, false
	}
	l := newReplicaLayout(&s)
	for i := len(s.Nodes) - 1; i >= 0; i-- {
		o := &s.Nodes[i]
		self, _ := o.Self()
		if !o.Joined() || o.Leaving || !self.IsMaster() || len(self.Slots) > 0 || l.isMaster(self.ID) {
			continue
		}
		m := l.fewest(o, self.ID)
		if m == nil {
			return Action{}, false
		}
		return Action{ActionDemote, []conn.Command{replicate(o, observe.SelfID(m))},
			fmt.Sprintf("%s has no slots and the spec needs %d masters: it now replicates %s", o.Pod, s.Masters, m.Pod)}, true
	}
	return Action{}, false
}

// planBalanceReplicas: while the master with the most replicas has two more than the one
// with the fewest (or the fewest has fewer than replicasPerMaster and another has more),
// one replica moves, preferably one outside the new master's failure domain.
func planBalanceReplicas(s observe.Snapshot) (Action, bool) {
	if !layoutStable(&s) {
		return Action{}, false
	}
	l := newReplicaLayout(&s)
	if len(l.masters) < 2 {
		return Action{}, false
	}
	most, least := l.masters[0], l.masters[0]
	for _, m := range l.masters {
		n := len(l.replicas[observe.SelfID(m)])
		if n > len(l.replicas[observe.SelfID(most)]) {
			most = m
		}
		if n < len(l.replicas[observe.SelfID(least)]) {
			least = m
		}
	}
	hi, lo := len(l.replicas[observe.SelfID(most)]), len(l.replicas[observe.SelfID(least)])
	if hi-lo < 2 && (lo >= s.ReplicasPerMaster || hi <= s.ReplicasPerMaster) {
		return Action{}, false
	}
	donors := slices.Clone(l.replicas[observe.SelfID(most)])
	slices.SortStableFunc(donors, func(a, b *observe.Observation) int {
		return cmp.Compare(nodes.BoolRank(sameDomain(a, least)), nodes.BoolRank(sameDomain(b, least)))
	})
	r := donors[0]
	return Action{ActionBalanceReplicas, []conn.Command{replicate(r, observe.SelfID(least))},
		fmt.Sprintf("%s moved from %s (%d replicas) to %s (%d)", r.Pod, most.Pod, hi, least.Pod, lo)}, true
}

// planSeparate: a replica in its master's failure domain swaps masters with a replica of
// another master, when that puts both outside their new master's domain. The counts stay.
func planSeparate(s observe.Snapshot) (Action, bool) {
	if !layoutStable(&s) {
		return Action{}, false
	}
	l := newReplicaLayout(&s)
	for _, m := range l.masters {
		for _, r := range l.replicas[observe.SelfID(m)] {
			if !sameDomain(r, m) {
				continue
			}
			for _, m2 := range l.masters {
				if m2 == m || sameDomain(r, m2) {
					continue
				}
				for _, r2 := range l.replicas[observe.SelfID(m2)] {
					if sameDomain(r2, m) {
						continue
					}
					return Action{ActionSeparate, []conn.Command{replicate(r, observe.SelfID(m2)), replicate(r2, observe.SelfID(m))},
						fmt.Sprintf("%s shared a Kubernetes node with its master %s: it now replicates %s, and %s replicates %s",
							r.Pod, m.Pod, m2.Pod, r2.Pod, m.Pod)}, true
				}
			}
		}
	}
	return Action{}, false
}

// Unseparated lists, one message each, the replicas that share a failure domain (a
// Kubernetes node, or a zone when both pods know theirs) with their master, once the layout
// is stable and planSeparate has no swap left that would separate them: the cluster cannot
// keep a shard's copies apart with the nodes it has. Empty when every replica is apart.
func Unseparated(s observe.Snapshot) []string {
	if !layoutStable(&s) {
		return nil
	}
	if _, ok := planSeparate(s); ok {
		return nil
	}
	l := newReplicaLayout(&s)
	var out []string
	for _, m := range l.masters {
		for _, r := range l.replicas[observe.SelfID(m)] {
			if !sameDomain(r, m) {
				continue
			}
			where := "Kubernetes node " + r.Host
			if r.Host == "" || r.Host != m.Host {
				where = "zone " + r.Zone
			}
			out = append(out, fmt.Sprintf("%s shares %s with its master %s", r.Pod, where, m.Pod))
		}
	}
	return out
}

// ExtraMasters names the pods of staying masters that serve no slot beyond the masters the
// spec asks for: a Form or a Join cut short before its CLUSTER REPLICATE leaves one, and
// planDemote makes it a replica. The shard it should copy has one copy fewer until then.
func ExtraMasters(s observe.Snapshot) []string {
	if s.Masters == 0 || !layoutStable(&s) {
		return nil
	}
	l := newReplicaLayout(&s)
	var pods []string
	for _, o := range s.Joined() {
		if self, _ := o.Self(); !o.Leaving && self.IsMaster() && !self.Failed && len(self.Slots) == 0 && !l.isMaster(self.ID) {
			pods = append(pods, o.Pod)
		}
	}
	return pods
}
