package redisadmin

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
	View        []Node
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
	// Spec.Coverage (the operator has not set it on this process).
	StaleCoverage bool
	// KeysInUncovered counts, on a master, its keys in each slot its view routes to no
	// master (CLUSTER COUNTKEYSINSLOT, asked only when there are such slots).
	KeysInUncovered map[int]int64

	// routes memoizes routes(o) (View does not change once observed).
	routes *[SlotCount]string
}

// Answered reports whether the node answered every read.
func (o *Observation) Answered() bool { return o.Err == nil && len(o.View) > 0 }

// InSync reports whether the node, a replica, holds a current copy of its master: its link
// is up and no full sync is under way. It is the one test of a replica's copy: the health
// judgement, the status, the choice of a backup's source and a failover's catch-up all use it.
func (o *Observation) InSync() bool { return replicationInSync(o.Replication) }

// replicationInSync is InSync on a node's INFO replication fields.
func replicationInSync(info map[string]string) bool {
	return info["master_link_status"] == "up" && info["master_sync_in_progress"] != "1"
}

// Self is the node's own line of its view.
func (o *Observation) Self() (Node, bool) {
	for _, n := range o.View {
		if n.Myself {
			return n, true
		}
	}
	return Node{}, false
}

// Joined reports whether the node belongs to a cluster: it knows other nodes or serves
// slots. A node that answers but has not joined is fresh (new, or back with an empty volume).
func (o *Observation) Joined() bool {
	self, ok := o.Self()
	return o.Answered() && ok && (len(o.View) > 1 || len(self.Slots) > 0)
}

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
}

// observeParallelism bounds how many nodes Observe reads at once.
const observeParallelism = 16

// Observe reads one snapshot of the nodes at obs[i].Addr: each node is asked once, in one
// pipelined round trip (CLUSTER NODES, CLUSTER INFO, INFO server, replication, memory,
// stats and errorstats), the nodes in parallel; a second round trip counts keys only on a
// master whose view leaves slots unrouted. A node that does not answer keeps its error. obs
// carries the pod facts; Observe fills the rest.
func (a *Admin) Observe(ctx context.Context, obs []Observation) {
	var wg sync.WaitGroup
	limit := make(chan struct{}, observeParallelism)
	for i := range obs {
		wg.Go(func() {
			limit <- struct{}{}
			defer func() { <-limit }()
			a.observe(ctx, &obs[i])
		})
	}
	wg.Wait()
}

// observe reads one node (see Observe).
func (a *Admin) observe(ctx context.Context, o *Observation) {
	if o.Addr == "" {
		o.Err = errors.New("the pod has no IP")
		return
	}
	var view, info, server *goredis.StringCmd
	read := func(p goredis.Pipeliner) error {
		view, info, server = p.ClusterNodes(ctx), p.ClusterInfo(ctx), p.Info(ctx, "server", "replication", "memory", "stats", "errorstats")
		return nil
	}
	_, o.Err = a.Client(o.Addr).Pipelined(ctx, read)
	if retryable(ctx, o.Err) {
		// A kept connection the node closed (it restarted): these reads are safe to repeat
		// on a new one.
		_, o.Err = a.Client(o.Addr).Pipelined(ctx, read)
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
	if up, err := strconv.ParseInt(o.Replication["uptime_in_seconds"], 10, 64); err == nil {
		o.Started = time.Now().Add(-time.Duration(up) * time.Second)
	}
	if self, ok := o.Self(); ok && self.IsMaster() && len(o.View) > 1 {
		if o.KeysInUncovered, o.Err = a.countKeys(ctx, o.Addr, uncoveredIn(o)); o.Err != nil {
			// A node answers every read or counts as silent.
			o.View, o.Info, o.Replication, o.KeysInUncovered, o.Started, o.routes = nil, nil, nil, nil, time.Time{}, nil
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
// what MemoryOf reads, and a master's count of good replicas under min-replicas-to-write.
func nodeInfoField(field string) bool {
	switch field {
	case "uptime_in_seconds", "role", "master_host", "master_port", "master_link_status", "master_sync_in_progress", "slave_repl_offset",
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
	if err == nil || ctx.Err() != nil || conn.IsAuthError(err) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	if errors.As(err, &op) && (op.Op == "dial" || op.Timeout()) {
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

// answering are the observations of nodes that answered.
func (s *Snapshot) answering() []*Observation {
	var out []*Observation
	for i := range s.Nodes {
		if s.Nodes[i].Answered() {
			out = append(out, &s.Nodes[i])
		}
	}
	return out
}

// answeringWhere are the addresses and pods of the answering nodes for which match holds.
func (s *Snapshot) answeringWhere(match func(o *Observation) bool) (addrs, pods []string) {
	for _, o := range s.answering() {
		if match(o) {
			addrs, pods = append(addrs, o.Addr), append(pods, o.Pod)
		}
	}
	return addrs, pods
}

// joined are the observations of nodes that answered and belong to the cluster.
func (s *Snapshot) joined() []*Observation {
	var out []*Observation
	for i := range s.Nodes {
		if s.Nodes[i].Joined() {
			out = append(out, &s.Nodes[i])
		}
	}
	return out
}

// byID maps the ID of every answering node to its observation.
func (s *Snapshot) byID() map[string]*Observation {
	out := map[string]*Observation{}
	for _, o := range s.answering() {
		if self, ok := o.Self(); ok {
			out[self.ID] = o
		}
	}
	return out
}

// known is every node some joined node lists, merged: a node that answers as itself, the
// others as the joined views see them (flags, slots and pong times merged).
type known struct {
	node     Node
	answers  *Observation // nil when no pod answers with this ID
	failed   bool         // flagged fail by some view
	slots    []SlotRange  // the slots some view routes to it
	lastPong int64        // the newest pong time any view recorded, in ms
	listedBy int
}

// cluster merges the joined views into one entry per node ID, in ID order.
func (s *Snapshot) cluster() []*known {
	ids := s.byID()
	byID := map[string]*known{}
	for _, o := range s.joined() {
		for _, n := range o.View {
			if n.HasFlag("handshake") {
				continue
			}
			k := byID[n.ID]
			if k == nil {
				k = &known{node: n, answers: ids[n.ID]}
				byID[n.ID] = k
			}
			k.listedBy++
			k.failed = k.failed || n.Failed
			if n.IsMaster() && len(n.Slots) > 0 {
				k.slots = nodes.MergeSlots(append(k.slots, n.Slots...))
			}
			k.lastPong = max(k.lastPong, n.PongRecv)
			if n.Myself {
				k.node = n
			}
		}
	}
	out := make([]*known, 0, len(byID))
	for _, k := range byID {
		out = append(out, k)
	}
	slices.SortFunc(out, func(a, b *known) int { return strings.Compare(a.node.ID, b.node.ID) })
	return out
}

// silentFor is how long a node has not been heard of by any joined view.
func (s *Snapshot) silentFor(k *known) time.Duration {
	if k.lastPong == 0 {
		return time.Duration(1<<62 - 1)
	}
	return s.Now.Sub(time.UnixMilli(k.lastPong))
}

// memberRecord is the member record after s: every joined pod with its node ID, and every other
// recorded pod (silent, back empty, or gone) whose ID some joined node still lists, so its
// start guard keeps an empty volume from serving at its address until the old role is
// settled (its slots taken over, its ID forgotten). With no joined node at all nothing is
// released: a total outage is not a reason to start empty nodes.
func memberRecord(s Snapshot) map[string]string {
	joined := s.joined()
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
		out[o.Pod] = selfID(o)
	}
	return out
}
