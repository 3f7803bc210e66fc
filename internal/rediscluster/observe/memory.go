package observe

import (
	"strconv"
	"strings"
)

// NodeMemory is what a node's INFO memory, stats and errorstats say of its memory.
type NodeMemory struct {
	// Used is used_memory, MaxMemory maxmemory (0: none), in bytes.
	Used, MaxMemory int64
	// Policy is maxmemory_policy.
	Policy string
	// Fragmentation is mem_fragmentation_ratio.
	Fragmentation float64
	// Evicted is evicted_keys, Rejected the writes refused with OOM (errorstat_OOM), since
	// the node started.
	Evicted, Rejected int64
	// Known: the node reported its maxmemory.
	Known bool
}

// MemoryOf reads o's memory fields (zero when it did not answer).
func MemoryOf(o *Observation) NodeMemory {
	r := o.Replication
	num := func(field string) int64 { n, _ := strconv.ParseInt(r[field], 10, 64); return n }
	m := NodeMemory{Used: num("used_memory"), MaxMemory: num("maxmemory"), Policy: r["maxmemory_policy"], Evicted: num("evicted_keys")}
	_, m.Known = r["maxmemory"]
	m.Fragmentation, _ = strconv.ParseFloat(r["mem_fragmentation_ratio"], 64)
	// errorstat_OOM:count=3
	if stat, ok := r["errorstat_OOM"]; ok {
		m.Rejected, _ = strconv.ParseInt(strings.TrimPrefix(stat, "count="), 10, 64)
	}
	return m
}

// Percent is used memory as a share of maxmemory in whole percent, false without maxmemory.
func (m NodeMemory) Percent() (int32, bool) {
	if m.MaxMemory <= 0 {
		return 0, false
	}
	return int32(m.Used * 100 / m.MaxMemory), true
}
