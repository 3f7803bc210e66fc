// Package plan is the planner, pure: NextStep(Desired, Snapshot, Health) returns the one Step
// to take next (record the members, form, join, move a batch of slots, remove, fail over,
// replace a pod, repair open or strayed slots, run a recovery, rotate a password or the
// CA, reload a certificate, set memory, write safety, coverage or the announced hostname,
// grow the claims, restore or reload a backup, autoscale, or wait with a reason), and the
// planner-side facts it reads (Rotation, CARotation, Volumes, Announce, the held slots
// still held).
//
// It sits on floor 6 of internal/rediscluster and imports autoscale, health, recovery,
// observe, layout and nodes: no connection and no clock but the Snapshot's, so every
// planner is a table test over tests/fakesnapshot. The executor (package execute)
// carries its steps out; nothing below it imports it.
package plan
