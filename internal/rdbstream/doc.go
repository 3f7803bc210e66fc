// Package rdbstream fetches a Redis node's RDB snapshot over the replication protocol, as
// `redis-cli --rdb` does, and streams it to an io.Writer: the node's data never has to fit in
// this process's memory or on its disk.
//
// The exchange is a replica's first full synchronization: AUTH when a password is set,
// REPLCONF capa eof (so a node with repl-diskless-sync may stream the RDB straight from its
// fork), REPLCONF rdb-only 1 (Redis 7: the node sends the snapshot and no command stream
// after it, and closes), then PSYNC ? -1. The node answers +FULLRESYNC <replid> <offset>:
// the snapshot holds exactly the writes up to that offset of that replication history, which
// is what a backup records as its point in time. The payload comes either as $<length> and
// that many bytes (the node wrote the RDB to its disk first), or as $EOF:<40-byte mark> and
// bytes up to that mark (diskless). REPLCONF listening-port is not sent: it only tells the
// node where its replica would listen, and this client is no replica.
//
// While the payload passes, Fetch counts it, hashes it (SHA-256, for the backup's manifest),
// and checks it as an RDB: the "REDIS" magic and version first, and at the end the EOF opcode
// and the CRC-64 Redis appends (unless the node runs with rdbchecksum no). A payload that
// ends early, or any of those checks failing, is an error: the bytes written to the
// destination are then not a snapshot, and the caller discards them. On the way it also
// reads the RDB's own account of itself, before the first key: the Redis version and time
// that wrote it (aux fields redis-ver, ctime) and database 0's key and TTL counts (RESIZEDB),
// exact at the snapshot's instant.
//
// A node asked for a snapshot forks (unless a fork for another replica can serve it) and,
// with repl-diskless-sync, waits repl-diskless-sync-delay seconds for other replicas before
// it starts; the caller's context bounds the whole exchange and Options.IdleTimeout any
// silence within it. The node lists the connection among its replicas (INFO replication,
// port 0) until the snapshot is sent. The user must be allowed PSYNC and REPLCONF (ACL
// categories @admin @dangerous, or +psync +replconf).
package rdbstream
