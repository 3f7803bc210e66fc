package plan

import (
	"cmp"

	"github.com/middleware-operator/middleware-operator/internal/rediscluster/observe"
)

// StepAnnounce sets, with one CONFIG SET on the node of Pod at Addr, the hostname it
// announces to clients (cluster-announce-hostname: Step.Hostname) and
// cluster-preferred-endpoint-type (hostname while Desired.Announce is on, ip once it is off).
// Nothing else changes: the node keeps its pod IP in CLUSTER NODES and on the cluster bus,
// so the operator still finds each pod's node by its address, the nodes still meet and
// gossip at pod addresses, and a node back at a new pod IP is healed as before. Only the
// answers to clients (CLUSTER SLOTS, CLUSTER SHARDS, MOVED, ASK) name the hostname.
const StepAnnounce StepKind = "Announce"

// Endpoint types of cluster-preferred-endpoint-type the operator sets.
const (
	EndpointHostname = "hostname"
	EndpointIP       = "ip"
)

// Announce is what the nodes announce to clients outside the Kubernetes cluster
// (spec.externalAccess), in the planner's terms.
type Announce struct {
	// On: the nodes announce Hostnames and send clients to them; off, every node is brought
	// back to announcing none (spec.externalAccess removed).
	On bool
	// Hostnames are the external hosts by pod; a pod missing here has none assigned yet.
	Hostnames map[string]string
	// Set are the pods whose running process the operator set the announcement on with
	// this On: cluster-preferred-endpoint-type cannot be read back, and a restarted process
	// starts with redis.conf's.
	Set map[string]bool
	// PendingWhy says, in parentheses, why a pod may have no host yet (by the kind of
	// Service); the wait of a pod that joins without one names it.
	PendingWhy string
}

// EndpointType is the cluster-preferred-endpoint-type a.On asks for.
func (a Announce) EndpointType() string {
	if a.On {
		return EndpointHostname
	}
	return EndpointIP
}

// planAnnounce is the side step of Desired.Announce, taken before next (what NextStep chose)
// unless next is already a side step or a lost cluster: the first answering node that does
// not announce what it should is set, one node per look. A node with no external host yet
// is left as it is (an old host beats none); but while external access is on, a new node
// does not join before it has one: outside clients could not reach what it would serve.
func planAnnounce(spec Desired, s observe.Snapshot, next Step) Step {
	a := spec.Announce
	if a == nil || next.Behind != nil || next.Kind == StepLost {
		return next
	}
	for _, o := range s.Answering() {
		self, ok := o.Self()
		if !ok {
			continue
		}
		want := ""
		if a.On {
			if want = a.Hostnames[o.Pod]; want == "" {
				continue
			}
		}
		if self.Hostname == want && a.Set[o.Pod] {
			continue
		}
		behind := next
		reason := "announcing " + want + " to clients on " + o.Pod
		if !a.On {
			reason = "announcing the pod address again on " + o.Pod + " (spec.externalAccess removed)"
		}
		return Step{Kind: StepAnnounce, Pod: o.Pod, Addr: o.Addr, Hostname: want, After: LookSoon, Reason: reason,
			Behind: &behind, Rotation: next.Rotation, Autoscale: next.Autoscale}
	}
	if a.On && next.Kind == StepJoin && a.Hostnames[next.Pod] == "" {
		return Step{Kind: StepWait, Operation: next.Operation, After: LookSoon, Rotation: next.Rotation, Autoscale: next.Autoscale,
			Reason: next.Pod + " waits for an external address " + cmp.Or(a.PendingWhy, "(its Service has no load-balancer ingress yet)") + " before it joins: " +
				"clients outside could not reach what it would serve"}
	}
	return next
}
