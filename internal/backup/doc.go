// Package backup holds what a RedisCluster backup is in the bucket: its manifest, a JSON file
// beside the shards' RDB files that says which cluster they came from, which slots each file
// holds, which node and which point of its replication history each was taken from, and the
// size, key count and SHA-256 a restore checks each file against.
//
// The format is versioned (FormatVersion): a manifest of a version this code does not know
// is refused rather than half-read, and fields added within a version are optional, so an
// older operator still restores what a newer one wrote of the same version.
package backup
