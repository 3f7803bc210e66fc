// Package rdbload restores an RDB snapshot into a running Redis node over the Redis
// protocol: the data path of a restore from a backup.
//
// Why RESTORE, not a file. Redis loads an RDB file only when it starts, from its own disk,
// and in cluster mode refuses REPLICAOF, the one way to make it load one over the network.
// Copying a file onto a pod's volume and restarting Redis would serve a new cluster, but not
// the case the operator is built for: a shard whose master and replicas lost their data
// while the other shards keep serving. That shard's master is already running, in the
// cluster, owning its slots; restarting it with a file is a failover and a rejoin in the
// middle of the cluster's life. Here the RDB is read as a stream (from the object store, a
// file, anything) and every key is sent as RESTORE key ttl payload REPLACE ABSTTL to the
// running master, whose replicas follow through replication as for any write; the node keeps
// serving throughout, and nothing is written to its disk but through Redis itself.
//
// The reader. Reader parses the RDB only as far as it must to find where each value ends:
// lengths, string encodings (integers, LZF), and the layout of each value type Redis 7.0 to
// 7.4 writes (strings; lists as quicklists of listpacks or ziplists; sets as intsets,
// listpacks or tables; sorted sets as listpacks, ziplists or skiplists; hashes as zipmaps,
// ziplists, listpacks or tables, and 7.4's hashes with field expiries; streams of the three
// layouts with their consumer groups, pending entries and consumers). The value's bytes are
// taken as they are and framed as a DUMP payload: the type byte, the value, the RDB version
// of the file (2 bytes) and a CRC-64 over all that (8 bytes), little-endian, which is exactly
// what DUMP produces and RESTORE checks. A record's key and payload buffers are reused from
// key to key and grow only as the bytes arrive, never by what a length claims: memory is
// bounded by the largest record admitted (a key and its payload, at most DefaultMaxRecord,
// 32 MiB, or Options.MaxRecord), held once (up to twice while its buffer grows; a buffer
// over 1 MiB is dropped after its record), plus the read buffer, the first 128 bytes of
// the keys of the commands in flight, and the small strings held for MSETs (below). Across every Load of the process, one record larger
// than 1 MiB is held at a time. A larger record fails with ErrTooLarge at its length claim,
// an LZF string claiming more than LZF can expand with ErrCorrupt, and an input that ends
// early with ErrCorrupt ("truncated"). Function libraries come as their own records and are
// loaded with FUNCTION LOAD REPLACE. The layouts were read in Redis's src/rdb.c (7.0.15 and
// 7.4.1); testdata holds RDBs written by redis-server 7.0.15 and 7.4.1 with the DUMP of each
// key, and every payload the reader frames equals its DUMP byte for byte.
//
// What is refused, with an error naming it: RDB versions newer than MaxVersion (12, Redis
// 7.4), module values and module aux data (their bytes are the module's business), a
// database other than 0 (a cluster node has only database 0), the function format of 7.0's
// release candidates. Expiry, LRU idle time and LFU frequency opcodes are read; only the
// expiry is restored.
//
// Load. Load sends the records on one connection, opened and authenticated as rdbstream
// opens its own (rdbstream.Dial: address, ACL user and password, TLS), with a window of
// commands in flight answered on a second goroutine, so the node is never idle waiting for
// the next command and never more than the window behind. Keys outside the given slot ranges
// are skipped (a backup shard's file restored into a shard owning part of its slots), keys
// whose expiry has passed by the loader's clock are not sent; both are counted. The first
// error answer stops the load, naming the key and the node's words; the keys restored
// before it stay. LoadObject feeds Load from an object store as the object downloads.
//
// SET and MSET for strings. A string key goes as SET key value [PXAT ms] rather than
// RESTORE when the node lets the connection's user run SET (Load asks once, with a SET no
// node accepts: NOPERM or a syntax error, nothing written): the node then neither parses a
// DUMP payload nor checks its CRC-64, and its command is shorter (BenchmarkLoadShardsAgainstRedisCLI:
// RESTORE cost the nodes 8-25% more CPU per key than SET in every run; Load with SET about
// what redis-cli --pipe of the same SETs costs them).
// The value is the same: Redis encodes a string from its bytes either way (TestLoadEveryType
// compares every key's DUMP). An LZF string over 64 KiB uncompressed stays a RESTORE, so the
// loader holds no more than the record it admitted; an integer is sent as its decimal text.
// When the user may also run MSET (asked the same way, with an MSET of an odd count), a
// string of at most 1 KiB without an expiry is held by its slot and goes in one MSET with
// up to 7 other keys of that slot (batch.go): per key, a node and its replicas spend most of
// a small SET's CPU on the command itself, and an RDB lists keys in hash order, not by slot.
// The keys held are bounded (HeldBytesPerSlot, 256 bytes, for each slot loaded, at most 2 MiB
// a load, and half as much again in free buffers);
// past the bound the slot holding the most goes first, and a slot's held keys go before any
// other command for that slot, so each slot's writes keep the RDB's order.
// The operator's own ACL user has RESTORE but not SET, so its restores keep to RESTORE.

// What point in time. The restored data is the RDB's: the instant its node forked to write
// it (for a backup taken with rdbstream.Fetch, its replication offset). Keys keep their
// absolute expiries (ABSTTL), so a key whose TTL ran out between the backup and the restore
// is not restored, and one that had an hour left at the backup has an hour less.
//
// Integrity. The RDB's CRC-64 covers the whole file and is only known at its end: a byte
// damaged inside a value (not in the structure, which fails at once) is detected there, after
// the keys before the end were restored. After the checksum the reader reads its input to
// the end: bytes after the RDB are an error, and so is an error the input returns there,
// such as objectstore.Get's size and SHA-256 check passed on through an io.Pipe
// (CloseWithError), so a load succeeds only when the object was the one the manifest names.
// A caller that must not serve damaged data treats any error as "the node holds part of the
// RDB" and empties it (FLUSHALL) before it serves. A
// single RESTORE payload larger than the node's proto-max-bulk-len (512 MB by default) is
// refused by the node.
package rdbload
