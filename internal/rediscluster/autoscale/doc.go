// Package autoscale is the memory autoscaler's decision, pure: from the masters' memory in
// one observe.Snapshot, its Health and what it remembered (State), Decide says whether to
// add a shard, remove one, rebalance the slots by memory, or wait, with the Phase the status
// shows. Its only clock is the snapshot's.
//
// It sits on floor 5 of internal/rediscluster and imports health, observe, layout (the held
// slots a rebalance left behind) and nodes; the step planner asks it once nothing else is
// to be done.
package autoscale
