package health

import (
	"fmt"
	"slices"
	"strings"

	"github.com/middleware-operator/middleware-operator/internal/rediscluster/nodes"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/observe"
)

// Partition is what one look shows of a master cut off from its peers while it still
// answers the operator: the masters that flag it failing, and the peers it flags failing
// itself.
type Partition struct {
	// Pod is the master's pod.
	Pod string
	// FlaggedBy names the other masters that flag it fail? or fail, each as "pod (flag)".
	FlaggedBy []string
	// Flags names the answering peers it flags fail? or fail itself, each as "pod (flag)".
	Flags []string
}

// String says what each side sees, for the status and events.
func (p Partition) String() string {
	var sides []string
	if len(p.FlaggedBy) > 0 {
		sides = append(sides, "flagged failing by "+strings.Join(p.FlaggedBy, ", "))
	}
	if len(p.Flags) > 0 {
		sides = append(sides, "itself flags "+strings.Join(p.Flags, ", ")+" failing")
	}
	return "master " + p.Pod + " answers but is cut off from its peers: " + strings.Join(sides, "; ")
}

// partitions finds, among the masters that answer and serve slots in their own view, those
// cut off from their peers: another answering master flags them fail? or fail, or they flag
// an answering peer so themselves (the two sides of a network partition, or a node too busy
// to answer its peers). A partition is seen from both sides, so the master that disagrees
// with the most answering nodes comes first, and a master whose every disagreement is with
// one already listed is not listed again (the majority's masters flag the cut-off one; they
// are not cut off themselves). A master that does not answer is a crashed node, not a
// partition, and is not listed.
func partitions(s observe.Snapshot) []Partition {
	joined := s.Joined()
	podOf := map[string]string{}
	for _, o := range joined {
		if self, ok := o.Self(); ok {
			podOf[self.ID] = o.Pod
		}
	}
	type candidate struct {
		Partition
		unseen map[string]bool // the answering pods it disagrees with, either way
	}
	var found []candidate
	for _, m := range joined {
		self, _ := m.Self()
		if !self.IsMaster() || len(self.Slots) == 0 {
			continue
		}
		c := candidate{Partition: Partition{Pod: m.Pod}, unseen: map[string]bool{}}
		for _, o := range joined {
			if o == m {
				continue
			}
			other, _ := o.Self()
			for _, n := range o.View {
				if n.ID == self.ID && (n.Failed || n.PossiblyFailed) {
					c.unseen[o.Pod] = true
					if other.IsMaster() {
						c.FlaggedBy = append(c.FlaggedBy, fmt.Sprintf("%s (%s)", o.Pod, failFlag(n)))
					}
				}
			}
		}
		for _, n := range m.View {
			if pod, answers := podOf[n.ID]; answers && !n.Myself && (n.Failed || n.PossiblyFailed) {
				c.unseen[pod] = true
				c.Flags = append(c.Flags, fmt.Sprintf("%s (%s)", pod, failFlag(n)))
			}
		}
		if len(c.unseen) > 0 {
			slices.Sort(c.FlaggedBy)
			slices.Sort(c.Flags)
			found = append(found, c)
		}
	}
	slices.SortStableFunc(found, func(a, b candidate) int { return len(b.unseen) - len(a.unseen) })
	var out []Partition
	listed := map[string]bool{}
	for _, c := range found {
		explained := true
		for pod := range c.unseen {
			explained = explained && listed[pod]
		}
		if !explained {
			out = append(out, c.Partition)
			listed[c.Pod] = true
		}
	}
	return out
}

// failFlag is the failure flag of n as CLUSTER NODES prints it.
func failFlag(n nodes.Node) string {
	if n.Failed {
		return "fail"
	}
	return "fail?"
}

// dualClaims says, for each pair of answering masters that both claim some slots as their
// own (each in its own view), which slots and which two: after a failover on the majority
// side, the cut-off master still serves its old slots to the clients that reach it, and
// writes it takes there are lost when it rejoins.
func dualClaims(s observe.Snapshot) []string {
	joined := s.Joined()
	if !claimsOverlap(joined) {
		return nil // every look of a healthy cluster: no slot walk
	}
	// owner holds, per slot, 1 + the index in joined of the first master claiming it: an
	// array of small integers, not of strings, so a look does not put 256 KiB the garbage
	// collector must scan on the heap (issue 53: every idle look runs this).
	var owner [nodes.SlotCount]uint16
	type pair struct{ a, b string }
	shared := map[pair][]nodes.SlotRange{}
	var order []pair
	for i, o := range joined {
		self, _ := o.Self()
		if !self.IsMaster() {
			continue
		}
		for _, r := range self.Slots {
			for slot := r.Start; slot <= r.End; slot++ {
				if prev := owner[slot]; prev != 0 && joined[prev-1].Pod != o.Pod {
					k := pair{joined[prev-1].Pod, o.Pod}
					if _, seen := shared[k]; !seen {
						order = append(order, k)
					}
					shared[k] = appendSlot(shared[k], slot)
					continue
				}
				owner[slot] = uint16(i + 1)
			}
		}
	}
	out := make([]string, 0, len(order))
	for _, k := range order {
		out = append(out, fmt.Sprintf("slots %s are claimed as master by both %s and %s", nodes.FormatSlotRanges(shared[k]), k.a, k.b))
	}
	return out
}

// claimsOverlap reports whether any two slot ranges the answering masters claim as their
// own (each in its own view) overlap: the claims sorted by start, each must begin after
// every earlier one ended. Only then does dualClaims walk the slots.
func claimsOverlap(joined []*observe.Observation) bool {
	var claims []nodes.SlotRange
	for _, o := range joined {
		if self, _ := o.Self(); self.IsMaster() {
			claims = append(claims, self.Slots...)
		}
	}
	slices.SortFunc(claims, func(a, b nodes.SlotRange) int { return a.Start - b.Start })
	end := -1
	for _, r := range claims {
		if r.Start <= end {
			return true
		}
		end = max(end, r.End)
	}
	return false
}

// appendSlot adds slot to ranges, extending the last range when it follows it.
func appendSlot(ranges []nodes.SlotRange, slot int) []nodes.SlotRange {
	if n := len(ranges); n > 0 && ranges[n-1].End == slot-1 {
		ranges[n-1].End = slot
		return ranges
	}
	return append(ranges, nodes.SlotRange{Start: slot, End: slot})
}
