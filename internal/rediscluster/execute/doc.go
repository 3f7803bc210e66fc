// Package execute carries one step out over the Redis protocol, the way
// `redis-cli --cluster` would, without running redis-cli: Admin's methods Create, AddNode,
// DelNode, Rebalance, Reshard, MoveSlots, Fix, Failover and Run (a recovery.Action), each
// bounded by a move budget and the caller's context, and the one-step setters SetMemory,
// SetWriteSafety, SetCoverage, SetAnnounce, AddPassword, KeepOnlyPassword and ReloadTLS.
// Admin.Observe is a delegate to package observe's Observe on the conn.Pool Admin embeds,
// and Admin.CheckACLRules asks a node whether it takes a set of ACL rules.
//
// It sits on floor 7 of internal/rediscluster, on top: it imports plan (the value types
// the setters take), recovery (Action), layout (redis-cli's arithmetic it carries out),
// observe, conn and nodes, and nothing under internal/rediscluster imports it. Which step
// to take is package plan's NextStep, over package health's judgement of an
// observe.Snapshot.
//
// Admin.Create never touches a node that is already part of a cluster, holds slots or
// stores keys: an existing cluster is never re-created, reset or flushed.
//
// Moving slots never loses a key: for every slot, SETSLOT NODE goes to the target before
// the source and only once GETKEYSINSLOT found the source empty after the last MIGRATE; a
// MIGRATE error stops the move with the slot left open; a key on both nodes is never
// overwritten with a different value. Every operation is idempotent and can be resumed
// after an interruption: Rebalance and Reshard carry on from where the cluster is, and Fix
// finishes or rolls back the slots an interrupted move left open.
package execute
