// Package crashpoint lets a test kill the operator at an exact point between two commands
// of one step, where a SIGKILL from outside lands only by luck. In a binary built with the
// build tag crashpoints (tests/ha builds its operator so) and MWO_CRASHPOINT=<name> in its
// environment, the process exits at once the first time it reaches that point: status 137
// (as after SIGKILL), no deferred call, no graceful shutdown, no lease release. The operator
// as it ships is built without the tag: Reach is then an empty function, whatever the
// environment says.
package crashpoint

// Env is the environment variable that arms one crash point by name.
const Env = "MWO_CRASHPOINT"

// ExitCode is the status the process exits with, the one a shell reports after SIGKILL.
const ExitCode = 137

// JoinAfterMeet is reached when a joining Redis node has been sent CLUSTER MEET, before it
// is told which master to replicate: a crash there leaves an empty extra master.
const JoinAfterMeet = "join-after-meet"

// BackupMidUpload is reached when a backup's upload of a shard has read its first
// MidUploadBytes from the node: the file is partly sent, no shard is complete and no
// manifest is written.
const BackupMidUpload = "backup-mid-upload"

// MidUploadBytes is how far into a shard's stream BackupMidUpload is reached.
const MidUploadBytes = 64 << 10

// ArchiveReplayMidway is reached when a replay of archived commands (a restore's or a
// reload's) has sent its first ReplayMidwayCommands commands and the target has had time to
// apply them: a crash there leaves the slots half replayed.
const ArchiveReplayMidway = "archive-replay-midway"

// ReplayMidwayCommands is how many replayed commands ArchiveReplayMidway comes after.
const ReplayMidwayCommands = 200

// Tag is the build tag that compiles crash points in.
const Tag = "crashpoints"
