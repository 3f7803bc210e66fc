package nodes

import "slices"

// MergeSlots sorts ranges and joins adjacent or overlapping ones.
func MergeSlots(ranges []SlotRange) []SlotRange {
	sorted := slices.Clone(ranges)
	slices.SortFunc(sorted, func(x, y SlotRange) int { return x.Start - y.Start })
	var out []SlotRange
	for _, r := range sorted {
		if len(out) > 0 && r.Start <= out[len(out)-1].End+1 {
			out[len(out)-1].End = max(out[len(out)-1].End, r.End)
			continue
		}
		out = append(out, r)
	}
	return out
}

// OwnsSlot reports whether slot is in n.Slots.
func OwnsSlot(n Node, slot int) bool {
	for _, r := range n.Slots {
		if slot >= r.Start && slot <= r.End {
			return true
		}
	}
	return false
}

// SlotList expands ranges into slot numbers, in order.
func SlotList(ranges []SlotRange) []int {
	out := make([]int, 0, CountSlots(ranges))
	for _, r := range MergeSlots(ranges) {
		for s := r.Start; s <= r.End; s++ {
			out = append(out, s)
		}
	}
	return out
}

// RangesOf compresses slot numbers into sorted ranges.
func RangesOf(slots []int) []SlotRange {
	sorted := slices.Clone(slots)
	slices.Sort(sorted)
	var out []SlotRange
	for _, s := range slices.Compact(sorted) {
		if len(out) > 0 && out[len(out)-1].End == s-1 {
			out[len(out)-1].End = s
			continue
		}
		out = append(out, SlotRange{s, s})
	}
	return out
}

// ShortID is the first 8 characters of a node ID, for messages.
func ShortID(id string) string { return id[:min(8, len(id))] }

// BoolRank orders false before true: 0 for false, 1 for true, for sorting by a flag.
func BoolRank(b bool) int {
	if b {
		return 1
	}
	return 0
}
