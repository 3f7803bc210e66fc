// Package health is the one judge of a Redis Cluster: what its clients would see, derived
// from one observe.Snapshot. Assess gives the Health (slots assigned and served, silent,
// fresh and failed nodes, partitions, slots two masters claim, masters refusing writes, the
// Problems that keep it from being Ready); Lost tells a cluster whose every member came back
// empty; StableSlotMap and BackupSources say whether a backup can be taken and from which
// node of each shard. It is pure and reads the topology through package recovery's views
// (Meet, Unseparated, ExtraMasters), never the other way round.
package health
