package execute

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/middleware-operator/middleware-operator/internal/rediscluster/nodes"
)

// ProblemKind classifies what Check found wrong.
type ProblemKind string

// The kinds of problems Check reports.
const (
	// ProblemUnreachable: a node could not be queried.
	ProblemUnreachable ProblemKind = "Unreachable"
	// ProblemConfigMismatch: nodes disagree about who serves which slots, or about which
	// nodes are in the cluster.
	ProblemConfigMismatch ProblemKind = "ConfigMismatch"
	// ProblemSlotsUncovered: some of the SlotCount slots are served by no master.
	ProblemSlotsUncovered ProblemKind = "SlotsUncovered"
	// ProblemOpenSlots: a node has slots in importing or migrating state.
	ProblemOpenSlots ProblemKind = "OpenSlots"
	// ProblemClusterState: a node reports a cluster_state other than ok.
	ProblemClusterState ProblemKind = "ClusterState"
	// ProblemNodeFailed: a node is flagged fail or fail? by another node.
	ProblemNodeFailed ProblemKind = "NodeFailed"
)

// Problem is one thing Check found wrong.
type Problem struct {
	// Kind classifies the problem.
	Kind ProblemKind
	// Addr is the node the problem is about, or "" for the whole cluster.
	Addr string
	// Message describes the problem.
	Message string
}

// String returns the message prefixed with the kind.
func (p Problem) String() string { return string(p.Kind) + ": " + p.Message }

// CheckResult is what Check found.
type CheckResult struct {
	// Nodes are all the nodes found: each reachable one as it describes itself (with its
	// open slots), the others as the first reachable node sees them.
	Nodes []nodes.Node
	// SlotsCovered is the number of slots served by a master, as the first reachable node
	// sees it.
	SlotsCovered int
	// Problems lists what is wrong; empty when the cluster is healthy.
	Problems []Problem
}

// OK reports whether Check found no problem.
func (r *CheckResult) OK() bool { return len(r.Problems) == 0 }

// Err returns nil when the cluster is healthy, else an error listing the problems.
func (r *CheckResult) Err() error {
	if r.OK() {
		return nil
	}
	msgs := make([]string, len(r.Problems))
	for i, p := range r.Problems {
		msgs[i] = p.String()
	}
	return errors.New("cluster check failed: " + strings.Join(msgs, "; "))
}

// Masters returns the nodes that are masters.
func (r *CheckResult) Masters() []nodes.Node {
	return slices.DeleteFunc(slices.Clone(r.Nodes), func(n nodes.Node) bool { return n.Role != nodes.RoleMaster })
}

// Replicas returns the nodes that are replicas.
func (r *CheckResult) Replicas() []nodes.Node {
	return slices.DeleteFunc(slices.Clone(r.Nodes), func(n nodes.Node) bool { return n.Role != nodes.RoleSlave })
}

// probe is what Check learnt from one reachable node.
type probe struct {
	addr string
	self nodes.Node
	view []nodes.Node
	info map[string]string
}

// Check reproduces `redis-cli --cluster check`: starting from addrs, it visits every node
// the cluster knows and reports the problems it finds: nodes that cannot be reached or
// that are flagged as failing, nodes that disagree about the slot configuration or the
// membership, slots no master serves, open (importing or migrating) slots, and nodes whose
// cluster_state is not ok.
//
// Problems are in the result; the error is set only when ctx ends or no node at all could
// be queried.
func (a *Admin) Check(ctx context.Context, addrs []string) (CheckResult, error) {
	if len(addrs) == 0 {
		return CheckResult{}, errors.New("while checking the cluster: no address given")
	}
	var res CheckResult
	var probes []probe
	var queue []string
	queued := map[string]bool{}
	for _, addr := range addrs {
		if !queued[addr] {
			queued[addr] = true
			queue = append(queue, addr)
		}
	}
	visited := map[string]bool{} // node IDs
	var lastErr error
	for i := 0; i < len(queue); i++ {
		addr := queue[i]
		p, err := a.probe(ctx, addr)
		if err != nil {
			if ctx.Err() != nil {
				return CheckResult{}, fmt.Errorf("while checking the cluster: %w", ctx.Err())
			}
			lastErr = err
			res.Problems = append(res.Problems, Problem{ProblemUnreachable, addr, err.Error()})
			continue
		}
		if visited[p.self.ID] {
			continue
		}
		visited[p.self.ID] = true
		probes = append(probes, p)
		for _, n := range p.view {
			if n.Myself || n.Host == "" || n.HasFlag("noaddr") || n.HasFlag("handshake") || visited[n.ID] || queued[n.Addr] {
				continue
			}
			queued[n.Addr] = true
			queue = append(queue, n.Addr)
		}
	}
	if len(probes) == 0 {
		return res, fmt.Errorf("while checking the cluster: no node could be queried: %w", lastErr)
	}
	res.Nodes = clusterNodes(probes)
	res.SlotsCovered = checkCoverage(&res, probes[0].view)
	checkAgreement(&res, probes)
	for _, p := range probes {
		checkNode(&res, p)
	}
	checkFailures(&res, probes)
	return res, nil
}

// probe queries one node.
func (a *Admin) probe(ctx context.Context, addr string) (probe, error) {
	self, view, err := a.Myself(ctx, addr)
	if err != nil {
		return probe{}, err
	}
	info, err := a.ClusterInfo(ctx, addr)
	if err != nil {
		return probe{}, err
	}
	return probe{addr: addr, self: self, view: view, info: info}, nil
}

// clusterNodes lists every node: reachable ones as they describe themselves, the others as
// the first probe sees them.
func clusterNodes(probes []probe) []nodes.Node {
	self := map[string]nodes.Node{}
	for _, p := range probes {
		self[p.self.ID] = p.self
	}
	var out []nodes.Node
	seen := map[string]bool{}
	for _, n := range probes[0].view {
		if s, ok := self[n.ID]; ok {
			n = s
		}
		out = append(out, n)
		seen[n.ID] = true
	}
	for _, p := range probes {
		if !seen[p.self.ID] {
			out = append(out, p.self)
			seen[p.self.ID] = true
		}
	}
	return out
}

// checkCoverage reports slots no master of view serves and returns how many are served.
func checkCoverage(res *CheckResult, view []nodes.Node) int {
	var covered [nodes.SlotCount]bool
	n := 0
	for _, node := range view {
		if node.Role != nodes.RoleMaster {
			continue
		}
		for _, r := range node.Slots {
			for s := r.Start; s <= r.End; s++ {
				if !covered[s] {
					covered[s] = true
					n++
				}
			}
		}
	}
	if n < nodes.SlotCount {
		var missing []nodes.SlotRange
		for s, ok := range covered {
			if ok {
				continue
			}
			if len(missing) > 0 && missing[len(missing)-1].End == s-1 {
				missing[len(missing)-1].End = s
			} else {
				missing = append(missing, nodes.SlotRange{Start: s, End: s})
			}
		}
		res.Problems = append(res.Problems, Problem{ProblemSlotsUncovered, "",
			fmt.Sprintf("not all %d slots are covered by nodes: %d slots unassigned (%s)", nodes.SlotCount, nodes.SlotCount-n, nodes.FormatSlotRanges(missing))})
	}
	return n
}

// checkAgreement reports nodes whose slot configuration or membership differs from the
// first node's.
func checkAgreement(res *CheckResult, probes []probe) {
	first := probes[0]
	wantSlots, wantMembers := slotSignature(first.view), membership(first.view)
	for _, p := range probes[1:] {
		if slotSignature(p.view) != wantSlots {
			res.Problems = append(res.Problems, Problem{ProblemConfigMismatch, p.addr,
				fmt.Sprintf("nodes don't agree about configuration: %s and %s see different slot owners", p.addr, first.addr)})
		}
		if members := membership(p.view); members != wantMembers {
			res.Problems = append(res.Problems, Problem{ProblemConfigMismatch, p.addr,
				fmt.Sprintf("nodes don't agree about membership: %s knows %d nodes, %s knows %d",
					p.addr, strings.Count(members, ",")+1, first.addr, strings.Count(wantMembers, ",")+1)})
		}
	}
}

// membership lists the IDs a view knows, leaving out handshakes.
func membership(view []nodes.Node) string {
	var ids []string
	for _, n := range view {
		if !n.HasFlag("handshake") {
			ids = append(ids, n.ID)
		}
	}
	slices.Sort(ids)
	return strings.Join(ids, ",")
}

// checkNode reports open slots and a cluster_state other than ok on one node.
func checkNode(res *CheckResult, p probe) {
	if state := p.info["cluster_state"]; state != "ok" {
		res.Problems = append(res.Problems, Problem{ProblemClusterState, p.addr,
			fmt.Sprintf("%s reports cluster_state:%s", p.addr, state)})
	}
	if p.self.HasOpenSlots() {
		var parts []string
		for _, s := range sortedKeys(p.self.Migrating) {
			parts = append(parts, strconv.Itoa(s)+" migrating to "+p.self.Migrating[s])
		}
		for _, s := range sortedKeys(p.self.Importing) {
			parts = append(parts, strconv.Itoa(s)+" importing from "+p.self.Importing[s])
		}
		res.Problems = append(res.Problems, Problem{ProblemOpenSlots, p.addr,
			fmt.Sprintf("%s has open slots: %s", p.addr, strings.Join(parts, ", "))})
	}
}

// checkFailures reports every node some reachable node flags as failing.
func checkFailures(res *CheckResult, probes []probe) {
	reported := map[string]bool{}
	for _, p := range probes {
		for _, n := range p.view {
			if (n.Failed || n.PossiblyFailed) && !reported[n.ID] {
				reported[n.ID] = true
				res.Problems = append(res.Problems, Problem{ProblemNodeFailed, n.Addr,
					fmt.Sprintf("%s (%s) is flagged %s by %s", n.Addr, n.ID, strings.Join(n.Flags, ","), p.addr)})
			}
		}
	}
}

func sortedKeys(m map[int]string) []int { return slices.Sorted(maps.Keys(m)) }
