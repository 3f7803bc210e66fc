// Package recovery holds the topology repairs, pure: which CLUSTER commands fix what one
// observe.Snapshot shows. Recover chooses the next repair in a fixed order (introduce
// members to each other, re-point replicas, fail over a dead master by force, route a slot
// to its one owner, cover slots nobody serves, forget ghosts, demote surplus masters,
// balance and separate replicas); Abandon forgets the masters of lost shards once the user
// accepted the loss. Each returns an Action: commands to run in order and the message of
// its event. Nothing here talks to Redis (package execute's Admin.Run sends an Action)
// or reads the Health judgement: Meet, Unseparated, ExtraMasters and LostShards are also
// what the health judge and the planner ask of the topology.
package recovery
