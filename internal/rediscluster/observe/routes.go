package observe

import (
	"slices"
	"strings"

	"github.com/middleware-operator/middleware-operator/internal/rediscluster/nodes"
)

// Routes is where the node's view sends each slot: the ID of the master it lists for it, or
// "" (handshake entries and replicas route nothing). It is worked out once per observation:
// the assessment and several planners ask for it.
func (o *Observation) Routes() *[nodes.SlotCount]string {
	if o.routes != nil {
		return o.routes
	}
	var out [nodes.SlotCount]string
	for _, n := range o.View {
		if !n.IsMaster() || n.HasFlag("handshake") {
			continue
		}
		for _, r := range n.Slots {
			for slot := r.Start; slot <= r.End; slot++ {
				out[slot] = n.ID
			}
		}
	}
	o.routes = &out
	return o.routes
}

// routedMasters are the masters o's view routes slots to, with their slots.
func routedMasters(o *Observation) []nodes.Node {
	var out []nodes.Node
	for _, n := range o.View {
		if n.IsMaster() && !n.HasFlag("handshake") && len(n.Slots) > 0 {
			out = append(out, n)
		}
	}
	return out
}

// routing is o's view's routing in short: each master it routes slots to, with the ranges,
// in ID order. Two views with the same routing route every slot alike.
func routing(o *Observation) string {
	masters := routedMasters(o)
	parts := make([]string, len(masters))
	for i, n := range masters {
		parts[i] = n.ID + "=" + nodes.FormatSlotRanges(n.Slots)
	}
	slices.Sort(parts)
	return strings.Join(parts, ";")
}

// AgreedRoutes returns, when every view of joined routes every slot alike (the common case,
// checked in a few string comparisons rather than slot by slot), the masters they route
// slots to; ok is false otherwise.
func AgreedRoutes(joined []*Observation) (masters []nodes.Node, ok bool) {
	if len(joined) == 0 {
		return nil, false
	}
	first := routing(joined[0])
	for _, o := range joined[1:] {
		if routing(o) != first {
			return nil, false
		}
	}
	return routedMasters(joined[0]), true
}

// uncoveredIn lists the slots o's view routes to no master.
func uncoveredIn(o *Observation) []int {
	routed := 0
	for _, n := range routedMasters(o) {
		routed += nodes.CountSlots(n.Slots)
	}
	if routed == nodes.SlotCount {
		return nil // every slot routed (a slot is listed once per view): no slot-by-slot pass
	}
	var out []int
	for slot, owner := range o.Routes() {
		if owner == "" {
			out = append(out, slot)
		}
	}
	return out
}
