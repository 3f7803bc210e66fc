package layout

import (
	"errors"
	"fmt"
	"math"
	"net"

	"github.com/middleware-operator/middleware-operator/internal/rediscluster/nodes"
)

// minMasters is the smallest number of masters of a Redis Cluster, as redis-cli enforces.
const minMasters = 3

// Endpoint is a Redis server to put in a cluster.
type Endpoint struct {
	// Addr is "ip:port", the address clients and CLUSTER MEET use.
	Addr string
	// Host is the failure domain the server runs on (the Kubernetes node, or a hostname);
	// a replica is kept off its master's Host when possible. When empty, the IP of Addr
	// stands in for it, as redis-cli does.
	Host string
}

// MasterPlan is one master of a planned cluster with its slots and replicas.
type MasterPlan struct {
	Endpoint
	// Slots are the hash slots the master serves.
	Slots []nodes.SlotRange
	// Replicas replicate the master.
	Replicas []Endpoint
}

// Plan is the layout of a cluster to create.
type Plan struct {
	// Masters are the masters, in slot order.
	Masters []MasterPlan
	// NoReadyWait ends Admin.Create once the replicas are told to replicate, without waiting for
	// every node to report cluster_state:ok: the caller judges readiness itself (the
	// operator's next look, through Assess), so a Form step holds no worker for it.
	NoReadyWait bool
}

// Endpoints returns every endpoint of the plan, masters first, then replicas.
func (p *Plan) Endpoints() []Endpoint {
	var out []Endpoint
	for _, m := range p.Masters {
		out = append(out, m.Endpoint)
	}
	for _, m := range p.Masters {
		out = append(out, m.Replicas...)
	}
	return out
}

// Validate checks that the plan has at least three masters (minMasters), uses every
// address once, and assigns each of the SlotCount slots to exactly one master.
func (p *Plan) Validate() error {
	if len(p.Masters) < minMasters {
		return fmt.Errorf("invalid plan: %d masters, Redis Cluster needs at least %d", len(p.Masters), minMasters)
	}
	seen := map[string]bool{}
	for _, e := range p.Endpoints() {
		if e.Addr == "" {
			return errors.New("invalid plan: an endpoint has no address")
		}
		if seen[e.Addr] {
			return fmt.Errorf("invalid plan: address %s appears twice", e.Addr)
		}
		seen[e.Addr] = true
	}
	var owner [nodes.SlotCount]int
	for i, m := range p.Masters {
		if len(m.Slots) == 0 {
			return fmt.Errorf("invalid plan: master %s has no slots", m.Addr)
		}
		for _, r := range m.Slots {
			if r.Start < 0 || r.End >= nodes.SlotCount || r.End < r.Start {
				return fmt.Errorf("invalid plan: master %s has bad slot range %s", m.Addr, r)
			}
			for s := r.Start; s <= r.End; s++ {
				if owner[s] != 0 {
					return fmt.Errorf("invalid plan: slot %d is given to both %s and %s", s, p.Masters[owner[s]-1].Addr, m.Addr)
				}
				owner[s] = i + 1
			}
		}
	}
	for s, o := range owner {
		if o == 0 {
			return fmt.Errorf("invalid plan: slot %d is given to no master", s)
		}
	}
	return nil
}

// Create lays out a new cluster the way `redis-cli --cluster create --cluster-replicas
// replicasPerMaster` does: len(endpoints)/(1+replicasPerMaster) masters, the slots split among
// them with redis-cli's rounding, replicasPerMaster replicas for each master and the
// leftover nodes handed out as extra replicas round-robin from the first master.
//
// Unlike redis-cli, placement is deterministic: masters are interleaved across hosts, then a
// local search swaps nodes until no single swap lowers, in this order, the number of
// replicas on their master's host, the number of pairs of masters sharing a host, and the
// number of pairs of replicas of one master sharing a host.
func Create(endpoints []Endpoint, replicasPerMaster int) (Plan, error) {
	if replicasPerMaster < 0 {
		return Plan{}, fmt.Errorf("while planning the cluster: replicas per master must not be negative, got %d", replicasPerMaster)
	}
	masters := len(endpoints) / (1 + replicasPerMaster)
	if masters < minMasters {
		return Plan{}, fmt.Errorf("while planning the cluster: %d nodes with %d replicas per master make %d masters, "+
			"Redis Cluster needs at least %d masters, so at least %d nodes",
			len(endpoints), replicasPerMaster, masters, minMasters, minMasters*(1+replicasPerMaster))
	}
	if masters > nodes.SlotCount {
		return Plan{}, fmt.Errorf("while planning the cluster: %d masters is more than the %d slots", masters, nodes.SlotCount)
	}
	hosts, err := hostKeys(endpoints)
	if err != nil {
		return Plan{}, fmt.Errorf("while planning the cluster: %w", err)
	}

	l := newLayout(hosts, masters, replicasPerMaster)
	l.optimize()

	slots := splitSlots(masters)
	plan := Plan{Masters: make([]MasterPlan, masters)}
	for i, shard := range l.shards {
		plan.Masters[i] = MasterPlan{Endpoint: endpoints[shard[0]], Slots: []nodes.SlotRange{slots[i]}}
		for _, r := range shard[1:] {
			plan.Masters[i].Replicas = append(plan.Masters[i].Replicas, endpoints[r])
		}
	}
	return plan, nil
}

// hostKeys maps each node to a small integer naming its host, checking addresses are
// present and unique.
func hostKeys(endpoints []Endpoint) ([]int, error) {
	ids := map[string]int{}
	addrs := map[string]bool{}
	keys := make([]int, len(endpoints))
	for i, n := range endpoints {
		if n.Addr == "" {
			return nil, fmt.Errorf("node %d has no address", i)
		}
		if addrs[n.Addr] {
			return nil, fmt.Errorf("address %s appears twice", n.Addr)
		}
		addrs[n.Addr] = true
		host := n.Host
		if host == "" {
			host = n.Addr
			if h, _, err := net.SplitHostPort(n.Addr); err == nil {
				host = h
			}
		}
		id, ok := ids[host]
		if !ok {
			id = len(ids)
			ids[host] = id
		}
		keys[i] = id
	}
	return keys, nil
}

// splitSlots splits the slots over masters exactly as redis-cli does, float32 cursor and
// lround included, so a plan gives the same ranges as `redis-cli --cluster create`
// (3 masters: 0-5460, 5461-10922, 10923-16383).
func splitSlots(masters int) []nodes.SlotRange {
	perNode := float32(nodes.SlotCount) / float32(masters)
	var cursor float32
	first := 0
	out := make([]nodes.SlotRange, 0, masters)
	for i := range masters {
		last := int(math.Round(float64(cursor + perNode - 1)))
		if last > nodes.SlotCount || i == masters-1 {
			last = nodes.SlotCount - 1
		}
		if last < first {
			last = first
		}
		out = append(out, nodes.SlotRange{Start: first, End: last})
		first = last + 1
		cursor += perNode
	}
	return out
}

// layout places node indexes into shards: shards[i][0] is the master of shard i, the rest
// its replicas. It keeps its cost up to date as nodes are swapped.
type layout struct {
	host   []int
	shards [][]int
	// shardCost caches each shard's co-location counts.
	shardCost []cost
	// mastersOn counts the masters on each host.
	mastersOn map[int]int
	// cost is the cost of the whole layout.
	cost cost
}

// cost is compared lexicographically: masterReplica first, then masterMaster, then
// replicaReplica.
type cost struct {
	masterReplica, masterMaster, replicaReplica int
}

func (c cost) less(o cost) bool {
	if c.masterReplica != o.masterReplica {
		return c.masterReplica < o.masterReplica
	}
	if c.masterMaster != o.masterMaster {
		return c.masterMaster < o.masterMaster
	}
	return c.replicaReplica < o.replicaReplica
}

// newLayout builds the starting layout: nodes interleaved across hosts as redis-cli does,
// the first ones masters, then replicas handed out round by round, each taken from the
// host with the most nodes left among those not yet in the shard.
func newLayout(host []int, masters, replicasPerMaster int) *layout {
	order := interleave(host)
	l := &layout{host: host, shards: make([][]int, masters), mastersOn: map[int]int{}}
	for i := range masters {
		l.shards[i] = []int{order[i]}
		h := host[order[i]]
		l.cost.masterMaster += l.mastersOn[h]
		l.mastersOn[h]++
	}
	left := map[int][]int{} // host -> unused nodes, in interleaved order
	var hostOrder []int
	for _, n := range order[masters:] {
		if _, ok := left[host[n]]; !ok {
			hostOrder = append(hostOrder, host[n])
		}
		left[host[n]] = append(left[host[n]], n)
	}
	take := func(shard int) {
		used := map[int]bool{}
		for _, n := range l.shards[shard] {
			used[host[n]] = true
		}
		best := -1
		for _, h := range hostOrder {
			if len(left[h]) == 0 {
				continue
			}
			if best < 0 || (used[best] && !used[h]) || (used[best] == used[h] && len(left[h]) > len(left[best])) {
				best = h
			}
		}
		l.shards[shard] = append(l.shards[shard], left[best][0])
		left[best] = left[best][1:]
	}
	for range replicasPerMaster {
		for i := range masters {
			take(i)
		}
	}
	extra := len(host) - masters*(1+replicasPerMaster)
	for i := range extra {
		take(i)
	}
	l.shardCost = make([]cost, masters)
	for i := range l.shards {
		l.shardCost[i] = l.countShard(i)
		l.cost.masterReplica += l.shardCost[i].masterReplica
		l.cost.replicaReplica += l.shardCost[i].replicaReplica
	}
	return l
}

// interleave orders node indexes by taking one node from each host in turn, hosts in
// order of first appearance.
func interleave(host []int) []int {
	var groups [][]int
	for n, h := range host {
		for len(groups) <= h {
			groups = append(groups, nil)
		}
		groups[h] = append(groups[h], n)
	}
	out := make([]int, 0, len(host))
	for len(out) < len(host) {
		for h := range groups {
			if len(groups[h]) > 0 {
				out = append(out, groups[h][0])
				groups[h] = groups[h][1:]
			}
		}
	}
	return out
}

// countShard counts the replicas of shard i on its master's host and the pairs of its
// replicas sharing a host.
func (l *layout) countShard(i int) cost {
	shard := l.shards[i]
	var c cost
	seen := map[int]int{}
	for _, r := range shard[1:] {
		h := l.host[r]
		if h == l.host[shard[0]] {
			c.masterReplica++
		}
		c.replicaReplica += seen[h]
		seen[h]++
	}
	return c
}

// position is a place in the layout: shard and index within it (0 is the master).
type position struct{ shard, index int }

// node returns the node at p.
func (l *layout) node(p position) int { return l.shards[p.shard][p.index] }

// swap exchanges the nodes at a and b and updates the costs.
func (l *layout) swap(a, b position) {
	na, nb := l.node(a), l.node(b)
	if a.index == 0 {
		l.moveMaster(l.host[na], l.host[nb])
	}
	if b.index == 0 {
		l.moveMaster(l.host[nb], l.host[na])
	}
	l.shards[a.shard][a.index], l.shards[b.shard][b.index] = nb, na
	l.recount(a.shard)
	if b.shard != a.shard {
		l.recount(b.shard)
	}
}

// moveMaster moves one master from host from to host to in the master counts.
func (l *layout) moveMaster(from, to int) {
	l.mastersOn[from]--
	l.cost.masterMaster -= l.mastersOn[from]
	l.cost.masterMaster += l.mastersOn[to]
	l.mastersOn[to]++
}

// recount refreshes the cached cost of shard i.
func (l *layout) recount(i int) {
	old := l.shardCost[i]
	c := l.countShard(i)
	l.shardCost[i] = c
	l.cost.masterReplica += c.masterReplica - old.masterReplica
	l.cost.replicaReplica += c.replicaReplica - old.replicaReplica
}

// optimize applies improving swaps of two nodes until none is left. Every applied swap
// lowers the cost, so it ends.
func (l *layout) optimize() {
	var positions []position
	for i, shard := range l.shards {
		for j := range shard {
			positions = append(positions, position{i, j})
		}
	}
	for improved := true; improved; {
		improved = false
		for x, a := range positions {
			for _, b := range positions[x+1:] {
				if l.host[l.node(a)] == l.host[l.node(b)] {
					continue
				}
				before := l.cost
				l.swap(a, b)
				if l.cost.less(before) {
					improved = true
				} else {
					l.swap(a, b)
				}
			}
		}
	}
}
