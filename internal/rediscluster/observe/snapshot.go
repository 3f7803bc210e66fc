package observe

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/middleware-operator/middleware-operator/internal/rediscluster/conn"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/nodes"
	goredis "github.com/redis/go-redis/v9"
)

// Observation is one pod's Redis node as one reconcile saw it: read once, with read-only
// commands (CLUSTER NODES, CLUSTER INFO, INFO replication).
type Observation struct {
	// Pod is the pod's name.
	Pod string
	// Addr is the pod's ip:port, "" while the pod has no IP.
	Addr string
	// Host is the Kubernetes node the pod runs on, Zone that node's zone ("" when unknown).
	Host, Zone string
	// Leaving is true for a pod above the desired replica count (scale in).
	Leaving bool
	// Running: the pod's phase is Running; Terminating: it is being deleted.
	Running, Terminating bool
	// Unready: the pod runs but Kubernetes does not count it Ready (its readiness probe has
	// not passed yet): clients of its Services, and PodDisruptionBudgets, count it down.
	Unready bool
	// Revision is the StatefulSet revision of the pod's template.
	Revision string
	// PodStarted is when the pod started (its creation while it has not).
	PodStarted time.Time
	// Err is why the node did not answer, nil when it did.
	Err error
	// View is the node's CLUSTER NODES, Info its CLUSTER INFO, Replication its INFO
	// server, replication, memory, stats and errorstats (one map: their fields do not
	// overlap); empty when it did not answer. Observe keeps only the fields something
	// reads (clusterInfoField, nodeInfoField).
	View        []nodes.Node
	Info        map[string]string
	Replication map[string]string
	// Started is when the node's process started (from INFO server's uptime_in_seconds),
	// zero when unknown.
	Started time.Time
	// StaleCertificate: the node serves another certificate than the TLS Secret's (a renewed
	// or replaced one it has not loaded yet).
	StaleCertificate bool
	// CertificateUnknown: the node answered, but no TLS handshake this look showed which
	// certificate it serves (it timed out or was refused), so it is not known to serve the
	// TLS Secret's.
	CertificateUnknown bool
	// StaleCoverage: the node may run another cluster-require-full-coverage than
	// plan.Desired.Coverage (the operator has not set it on this process).
	StaleCoverage bool
	// InfoHead is the head of the node's CLUSTER INFO reply, the part from cluster_state to
	// cluster_my_epoch that changes only when the cluster's state does (not the message
	// counters after it): a quiet look compares it with the node's answer then ("" when it
	// did not answer).
	InfoHead string
	// KeysInUncovered counts, on a master, its keys in each slot its view routes to no
	// master (CLUSTER COUNTKEYSINSLOT, asked only when there are such slots).
	KeysInUncovered map[int]int64

	// routes memoizes Routes (View does not change once observed).
	routes *[nodes.SlotCount]string
}

// Answered reports whether the node answered every read.
func (o *Observation) Answered() bool { return o.Err == nil && len(o.View) > 0 }

// InSync reports whether the node, a replica, holds a current copy of its master: its link
// is up and no full sync is under way. It is the one test of a replica's copy: the health
// judgement, the status, the choice of a backup's source and a failover's catch-up all use it.
func (o *Observation) InSync() bool { return ReplicationInSync(o.Replication) }

// ReplicationInSync is InSync on a node's INFO replication fields.
func ReplicationInSync(info map[string]string) bool {
	return info["master_link_status"] == "up" && info["master_sync_in_progress"] != "1"
}

// Self is the node's own line of its view.
func (o *Observation) Self() (nodes.Node, bool) {
	for _, n := range o.View {
		if n.Myself {
			return n, true
		}
	}
	return nodes.Node{}, false
}

// Joined reports whether the node belongs to a cluster: it knows other nodes or serves
// slots. A node that answers but has not joined is fresh (new, or back with an empty volume).
func (o *Observation) Joined() bool {
	self, ok := o.Self()
	return o.Answered() && ok && (len(o.View) > 1 || len(self.Slots) > 0)
}

// RunID is the node process's run ID (INFO server's run_id, new at every start), "" when
// the node did not answer.
func (o *Observation) RunID() string { return o.Replication["run_id"] }

// Snapshot is what one reconcile knows about a cluster: every pod's node as read once, the
// members the operator recorded, and the shape the spec asks for. Planners and the status
// are derived from it alone.
type Snapshot struct {
	// Nodes are the cluster's pods, by ordinal.
	Nodes []Observation
	// Members maps each pod the operator recorded as a member of the formed cluster to its
	// node ID. It outlives every node, so an empty node is never mistaken for a new one.
	Members map[string]string
	// Masters is the number of masters the spec implies, ReplicasPerMaster the replicas
	// each should have.
	Masters, ReplicasPerMaster int
	// NodeTimeout is the cluster-node-timeout of the nodes.
	NodeTimeout time.Duration
	// Now is when the snapshot was taken (CLUSTER NODES' pong times are compared to it).
	Now time.Time
	// FormedFrom holds the run IDs (INFO server's run_id, new at every start of a process)
	// of the node processes this operator formed the cluster from, within the nodes'
	// settling time (nil otherwise): such a process met every peer it knows after it started,
	// and has no older view to correct.
	FormedFrom map[string]bool
}

// observeParallelism bounds how many nodes Observe reads at once.
const observeParallelism = 16

// Observe reads one snapshot of the nodes at obs[i].Addr: each node is asked once, in one
// pipelined round trip (CLUSTER NODES, CLUSTER INFO, INFO server, replication, memory,
// stats and errorstats), the nodes in parallel; a second round trip counts keys only on a
// master whose view leaves slots unrouted. A node that does not answer keeps its error, and
// an observation that comes with one is not read (its node is known silent). obs carries
// the pod facts; Observe fills the rest. pool's connections are kept for the next
// look.
func Observe(ctx context.Context, pool *conn.Pool, obs []Observation) {
	var wg sync.WaitGroup
	limit := make(chan struct{}, observeParallelism)
	for i := range obs {
		wg.Go(func() {
			limit <- struct{}{}
			defer func() { <-limit }()
			observeOne(ctx, pool, &obs[i])
		})
	}
	wg.Wait()
}

// observeOne reads one node (see Observe).
func observeOne(ctx context.Context, pool *conn.Pool, o *Observation) {
	if o.Addr == "" {
		o.Err = errors.New("the pod has no IP")
		return
	}
	if o.Err != nil {
		// Known silent already (a quiet look's read of it timed out a moment ago).
		return
	}
	var view, info, server *goredis.StringCmd
	read := func(p goredis.Pipeliner) error {
		view, info, server = p.ClusterNodes(ctx), p.ClusterInfo(ctx), p.Info(ctx, "server", "replication", "memory", "stats", "errorstats")
		return nil
	}
	_, o.Err = pool.Client(o.Addr).Pipelined(ctx, read)
	if retryable(ctx, o.Err) {
		// A kept connection the node closed (it restarted): these reads are safe to repeat
		// on a new one.
		_, o.Err = pool.Client(o.Addr).Pipelined(ctx, read)
	}
	if o.Err == nil {
		o.View, o.Err = nodes.ParseClusterNodes(view.Val())
	}
	if o.Err != nil {
		o.Err = fmt.Errorf("while reading the cluster state of %s: %w", o.Addr, o.Err)
		o.View = nil
		return
	}
	o.Info, o.Replication = nodes.ParseInfoFields(info.Val(), clusterInfoField), nodes.ParseInfoFields(server.Val(), nodeInfoField)
	o.InfoHead = keptInfoHead(info.Val())
	if up, err := strconv.ParseInt(o.Replication["uptime_in_seconds"], 10, 64); err == nil {
		o.Started = time.Now().Add(-time.Duration(up) * time.Second)
	}
	if self, ok := o.Self(); ok && self.IsMaster() && len(o.View) > 1 {
		if o.KeysInUncovered, o.Err = countKeys(ctx, pool, o.Addr, uncoveredIn(o)); o.Err != nil {
			// A node answers every read or counts as silent.
			o.View, o.Info, o.Replication, o.KeysInUncovered, o.Started, o.routes, o.InfoHead = nil, nil, nil, nil, time.Time{}, nil, ""
		}
	}
}

// clusterInfoField reports whether a look keeps a CLUSTER INFO field: those the status,
// the metrics and the planners read. The others (a dozen) are not copied into a map every
// look.
func clusterInfoField(field string) bool {
	switch field {
	case "cluster_state", "cluster_slots_pfail", "cluster_slots_fail", "cluster_known_nodes":
		return true
	}
	return false
}

// nodeInfoField reports whether a look keeps a field of INFO server, replication, memory,
// stats and errorstats (about 130 fields): the process's age, its replication,
// what MemoryOf reads, a master's count of good replicas under min-replicas-to-write, and the
// replication offset the archive's lag is measured against.
func nodeInfoField(field string) bool {
	switch field {
	case "uptime_in_seconds", "run_id", "role", "master_host", "master_port", "master_link_status", "master_sync_in_progress", "slave_repl_offset", "master_repl_offset",
		"used_memory", "maxmemory", "maxmemory_policy", "mem_fragmentation_ratio", "evicted_keys", "errorstat_OOM", GoodReplicasField:
		return true
	}
	return false
}

// retryable reports whether a read failed on a connection that was already open and that
// the node closed (not while dialing, not refused by the node, not timed out), so a new
// connection may succeed.
func retryable(ctx context.Context, err error) bool {
	var op *net.OpError
	if err == nil || ctx.Err() != nil || conn.IsAuthError(err) || TimedOut(err) {
		return false
	}
	if errors.As(err, &op) && op.Op == "dial" {
		// Not reached, or answering nothing (a frozen process): a new connection would only
		// wait as long again.
		return false
	}
	return errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) || errors.As(err, &op)
}

// CheckIdentity turns into a non-answer every observation whose node is not the one the
// member record names for its pod: a process at a reused IP (a deleted pod's server still
// running where a new pod got its address) speaks for another pod, and its view must not
// be taken for this pod's. A pod whose data is gone is held by its start guard until the
// record releases it, so a recorded pod never legitimately answers with another ID.
func (s *Snapshot) CheckIdentity() {
	for i := range s.Nodes {
		o := &s.Nodes[i]
		want, recorded := s.Members[o.Pod]
		self, ok := o.Self()
		if !recorded || !o.Answered() || !ok || self.ID == want {
			continue
		}
		o.Err = fmt.Errorf("the server at %s is node %s, but the member record has %s for pod %s", o.Addr, nodes.ShortID(self.ID), nodes.ShortID(want), o.Pod)
		o.View, o.Info, o.Replication, o.routes = nil, nil, nil, nil
	}
}

// Answering are the observations of nodes that answered.
func (s *Snapshot) Answering() []*Observation {
	var out []*Observation
	for i := range s.Nodes {
		if s.Nodes[i].Answered() {
			out = append(out, &s.Nodes[i])
		}
	}
	return out
}

// AnsweringWhere are the addresses and pods of the answering nodes for which match holds.
func (s *Snapshot) AnsweringWhere(match func(o *Observation) bool) (addrs, pods []string) {
	for _, o := range s.Answering() {
		if match(o) {
			addrs, pods = append(addrs, o.Addr), append(pods, o.Pod)
		}
	}
	return addrs, pods
}

// Joined are the observations of nodes that answered and belong to the cluster.
func (s *Snapshot) Joined() []*Observation {
	var out []*Observation
	for i := range s.Nodes {
		if s.Nodes[i].Joined() {
			out = append(out, &s.Nodes[i])
		}
	}
	return out
}

// ByID maps the ID of every answering node to its observation.
func (s *Snapshot) ByID() map[string]*Observation {
	out := map[string]*Observation{}
	for _, o := range s.Answering() {
		if self, ok := o.Self(); ok {
			out[self.ID] = o
		}
	}
	return out
}

// Known is one node some joined node lists, merged: a node that answers as itself, the
// others as the joined views see them (flags, slots and pong times merged).
type Known struct {
	Node     nodes.Node
	Answers  *Observation      // nil when no pod answers with this ID
	Failed   bool              // flagged fail by some view
	Slots    []nodes.SlotRange // the slots some view routes to it
	ListedBy int               // how many joined views list it
	lastPong int64             // the newest pong time any view recorded, in ms
}

// Cluster merges the joined views into one entry per node ID, in ID order.
func (s *Snapshot) Cluster() []*Known {
	ids := s.ByID()
	byID := map[string]*Known{}
	for _, o := range s.Joined() {
		for _, n := range o.View {
			if n.HasFlag("handshake") {
				continue
			}
			k := byID[n.ID]
			if k == nil {
				k = &Known{Node: n, Answers: ids[n.ID]}
				byID[n.ID] = k
			}
			k.ListedBy++
			k.Failed = k.Failed || n.Failed
			if n.IsMaster() && len(n.Slots) > 0 {
				k.Slots = nodes.MergeSlots(append(k.Slots, n.Slots...))
			}
			k.lastPong = max(k.lastPong, n.PongRecv)
			if n.Myself {
				k.Node = n
			}
		}
	}
	out := make([]*Known, 0, len(byID))
	for _, k := range byID {
		out = append(out, k)
	}
	slices.SortFunc(out, func(a, b *Known) int { return strings.Compare(a.Node.ID, b.Node.ID) })
	return out
}

// LastHeard is when any joined view last heard from a node (its newest pong), zero when
// none recorded one.
func (s *Snapshot) LastHeard(k *Known) time.Time {
	if k.lastPong == 0 {
		return time.Time{}
	}
	return time.UnixMilli(k.lastPong)
}

// SilentFor is how long a node has not been heard of by any joined view.
func (s *Snapshot) SilentFor(k *Known) time.Duration {
	heard := s.LastHeard(k)
	if heard.IsZero() {
		return time.Duration(1<<62 - 1)
	}
	return s.Now.Sub(heard)
}

// MemberRecord is the member record after s: every joined pod with its node ID, and every other
// recorded pod (silent, back empty, or gone) whose ID some joined node still lists, so its
// start guard keeps an empty volume from serving at its address until the old role is
// settled (its slots taken over, its ID forgotten). With no joined node at all nothing is
// released: a total outage is not a reason to start empty nodes.
func MemberRecord(s Snapshot) map[string]string {
	joined := s.Joined()
	if len(joined) == 0 {
		return s.Members
	}
	listed := map[string]bool{}
	for _, o := range joined {
		for _, n := range o.View {
			listed[n.ID] = true
		}
	}
	out := map[string]string{}
	for pod, id := range s.Members {
		if listed[id] {
			out[pod] = id
		}
	}
	for _, o := range joined {
		out[o.Pod] = SelfID(o)
	}
	return out
}

// countKeys runs CLUSTER COUNTKEYSINSLOT for each of slots on the node at addr, in one
// pipeline; nil when slots is empty.
func countKeys(ctx context.Context, pool *conn.Pool, addr string, slots []int) (map[int]int64, error) {
	if len(slots) == 0 {
		return nil, nil
	}
	cmds, err := pool.Client(addr).Pipelined(ctx, func(p goredis.Pipeliner) error {
		for _, slot := range slots {
			p.Do(ctx, "CLUSTER", "COUNTKEYSINSLOT", slot)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("while counting the keys of unassigned slots on %s: %w", addr, err)
	}
	out := map[int]int64{}
	for i, c := range cmds {
		n, err := c.(*goredis.Cmd).Int64()
		if err != nil {
			return nil, fmt.Errorf("while running CLUSTER COUNTKEYSINSLOT %d on %s: %w", slots[i], addr, err)
		}
		if n > 0 {
			out[slots[i]] = n
		}
	}
	return out, nil
}

// SelfID is the node ID of o's own line of its view, "" when it has none.
func SelfID(o *Observation) string { self, _ := o.Self(); return self.ID }

// GoodReplicasField is the INFO replication field in which a master counts the replicas
// that acknowledged its stream within min-replicas-max-lag; Redis prints it only while
// min-replicas-to-write is on.
const GoodReplicasField = "min_slaves_good_slaves"
