// Package redisarchive keeps a continuous archive of a Redis shard's writes, for
// point-in-time recovery: a base backup (rdbstream.Fetch, which records the snapshot's
// replication ID and offset) plus the archive replayed up to a target time gives the data
// of that time.
//
// # The follower
//
// A Follower reads the shard master's write stream over the replication protocol, as a
// replica would, from the base's position on: AUTH (rdbstream.Dial), REPLCONF capa eof capa
// psync2, then PSYNC <replid> <offset+1>. The master answers +CONTINUE [<replid>] when the
// position is in its replication backlog, and streams every command it propagates from
// there; a master promoted by a failover answers it too for its old master's history (its
// replid2), up to the point it was promoted. Anything else is a gap: +FULLRESYNC means the
// history cannot be continued (the offset left the backlog, or the history is another), and
// Run returns a *GapError without reading the snapshot the master then prepares. The
// archive of that timeline ends there; the caller takes a new base and starts timeline+1.
// Nothing is ever continued silently: segments chain by offset, and Replay refuses a chain
// with a hole (ErrGap, naming the missing range).
//
// One case is not a gap. An old master that is shut down after its replica was promoted
// sends REPLCONF GETACK (and, if it lives on, PINGs) that the promoted replica never had:
// the follower has them, so its offset is past the new master's fork point. Only the
// replication's own commands came after the last write, though: the follower steps back to
// the end of the last stored command and asks again (Follower.rewind;
// TestArchiveFollowsAFailover goes through it).
//
// Why the replication stream and not Redis 7's multi-part AOF with aof-timestamp-enabled:
// the AOF is on the node's own volume, so shipping it needs a process in every pod (a
// sidecar reading files as Redis rewrites and deletes them), it is lost with the volume it
// is meant to survive, it costs every node an fsync policy and rewrites, and its timestamps
// are whole seconds (#TS annotations). The replication stream is the same commands, read
// over the network by the operator with the credentials it already has, from whichever node
// is the master, with offsets that say exactly what is missing, and with millisecond
// receive times.
//
// # Not a replica
//
// The follower never sends REPLCONF ACK. What a Redis 7.0 master does with a replica's
// acknowledgements (src/replication.c, src/server.c, read for their semantics) and what was
// measured against redis-server 7.0.15:
//
//   - min-replicas-to-write counts a replica whose last acknowledgement is at most
//     min-replicas-max-lag seconds old (refreshGoodSlavesCount), and a PSYNC sets that time
//     as an acknowledgement would. A follower that never acknowledges is counted only in
//     the max-lag seconds after each of its PSYNCs: TestFollowerIsNotAGoodReplica, max lag
//     1 s, no real replica: writes accepted up to 1.5 s after the PSYNC, refused after,
//     until the next PSYNC. Sending ACKs would make it count all the time.
//   - WAIT counts replicas by their acknowledged offset: never the follower (WAIT 1 200
//     answers 0).
//   - A replica whose last acknowledgement is repl-timeout old (60 s by default) is dropped
//     ("Disconnecting timedout replica", replicationCron). The follower reconnects on its
//     own every KeepAlive (45 s), before that: PSYNC continues from the exact offset, so
//     nothing is lost (the test's writer: 86,857 keys across 4 connections, 0 lost).
//     Under the operator's writeSafety Strict (max lag 2 s) the follower is thus counted as
//     a good replica about 3 s in every 45 (about 7% of the time), under Redis's default max
//     lag of 10 s about 11 s in 45. A write accepted in such a window by a master that lost
//     its real replicas is still in the archive.
//   - SHUTDOWN (and SIGTERM) waits up to shutdown-timeout (10 s) for every replica to
//     acknowledge the master's offset (isReadyToShutdown) and asks them with REPLCONF
//     GETACK. The follower leaves on a GETACK and comes back after GetAckPause (2 s):
//     TestShutdownIsNotHeldByTheFollower, shutdown-timeout 3 s: 3.06 s with a follower that
//     stays, 0.10 s with one that leaves. WAIT sends GETACK too: an application that WAITs
//     makes the follower reconnect at most every GetAckPause, and the backlog must hold that
//     many seconds of writes.
//   - It is not a cluster node (no node ID, no cluster bus): CLUSTER NODES, the operator's
//     health judgement and the replicas' failover elections never see it. INFO replication
//     lists it among the slaves, with port=0 (it sends no listening-port), and
//     connected_slaves counts it, as during a backup's rdbstream.Fetch.
//
// Better still, follow a replica of the shard where it has one: a replica passes its
// master's stream on to its own replicas unchanged (the same replication ID and offsets,
// so the same base position works), and the master then never sees the follower at all:
// min-replicas-to-write, WAIT and the master's SHUTDOWN are out of its reach, and the master
// spends nothing on it (TestArchiveFromAReplica: the master lists the replica alone, the
// replay is key for key the master's data). The cost is the replica's lag, milliseconds, on
// the recovery point; a replica that loses its master stops streaming until it is back (the
// follower then moves, by Options.Master, to another replica or the master).
//
// The user needs PSYNC and REPLCONF (+psync +replconf, or @admin @dangerous).
//
// # Segments
//
// What the follower receives goes into segments, closed when their records reach
// SegmentBytes (16 MiB) or their first command is SegmentAge (500 ms) old, whichever comes
// first, and sent to a Sink: the object store (StoreSink, under the backups' prefix), memory
// or a directory. An idle shard writes none. A segment object is:
//
//	REDIS-ARCHIVE-SEGMENT\n
//	{"format":1,"cluster":...,"shard":...,"timeline":1,"replid":...,"start":S,"end":E,
//	 "firstTime":ms,"lastTime":ms,"commands":n,"bytes":b,"sha256":...}\n
//	records: [8-byte receive time, Unix ms][8-byte offset after the command][4-byte length][command]
//
// integers big-endian, the command its RESP bytes exactly as the master sent them. The
// segment holds the stream's bytes after S up to E; PING and REPLCONF count in the range but
// are not stored. Its name is <cluster>/archive/<shard>/<timeline, 8 digits>/<S, 20
// digits>.seg (SegmentName), so names sort as offsets do. Cancelling Run's context abandons
// the open segment, as a crash would; Resume reads where the last closed one ends, and a new
// follower continues from there (TestArchiveSurvivesAKilledFollower).
//
// Measured (BenchmarkFollowRecoveryPoint, a writer acknowledged one SET at a time): from a
// write's acknowledgement to the closing of the segment holding it, p50 260 ms, p99 541 ms,
// max 550 ms with segments of 500 ms (565, 1,066 and 1,098 ms with 1 s): the recovery point
// is the segment age plus the sink's write, so 500 ms keeps it under the 1 s with
// room for an object store's latency, at two objects a second per busy shard at most.
//
// Memory: the open segment and the one being written to the sink, each at most
// SegmentBytes plus 1 KiB (buffers never grow past that but for a single command larger
// than SegmentBytes), the largest command being read (bounded by MaxCommand, 512 MiB, as
// Redis's proto-max-bulk-len bounds an argument) and a 64 KiB read buffer: about 33 MiB per
// shard with the defaults and commands under 1 MiB. BenchmarkFollowMemory: peak live heap
// 31 MiB while archiving 64 MiB/s, 3 to 4 ms of CPU per MiB (SHA-256 of the segments is the
// largest part). A sink slower than the stream makes the follower stop reading; the master
// then holds the stream in its replica output buffer (client-output-buffer-limit replica,
// 256 MB by default, after which it drops the follower, which continues by PSYNC while the
// backlog holds the position).
//
// # Replay
//
// Replay reads a timeline's segments in offset order (checking each one's SHA-256 and that
// they chain), skips what the target already holds (offsets up to the base's) and the
// replication's own commands (PING, REPLCONF), and sends every other command (SELECT,
// MULTI/EXEC, the writes, Lua scripts and functions as their effects, expiries as
// PEXPIREAT) to the target node on one pipelined connection, up to a target time (by the
// follower's receive times), a target offset, or the archive's end. A MULTI..EXEC is
// decided at its MULTI and applied whole; a transaction the archive ends inside is
// discarded. The result says the offset and time reached. Receive times are the follower's
// clock: in TestArchiveRestoresToATime a write's receive time was within a few
// milliseconds of its acknowledgement (-2 to +1 ms in a quiet run, -5 to +8 ms in a busy
// one), which is the skew of a restore to a time. Scan lists the archive's commands with
// their times and offsets: where a FLUSHALL is, for a restore to just before it.
package redisarchive
