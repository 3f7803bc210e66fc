package nodes

import "fmt"

// ShardName names a backup's shard i in events, logs and errors. Shards are numbered from
// 0 everywhere a user sees them: in status.reload.loadedShards, in the backup's manifest and
// in its file names (shard-000.rdb), so "shard 1" names one file in every message.
func ShardName(i int) string { return fmt.Sprintf("shard %d", i) }
