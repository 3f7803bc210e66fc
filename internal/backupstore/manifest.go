package backupstore

import (
	"github.com/middleware-operator/middleware-operator/internal/backup"
	"github.com/middleware-operator/middleware-operator/internal/rdbstream"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/health"
)

// ShardEntry is the manifest entry of a shard streamed from src into file with result res
// (backup.StreamShard checked that the store holds what the node sent: size and SHA-256).
func ShardEntry(src health.ShardSource, res rdbstream.Result, file string) backup.Shard {
	sh := backup.Shard{
		MasterNodeID: src.MasterID, SourceNodeID: src.NodeID, SourceRole: backup.RoleMaster,
		ReplicationID: res.ReplID, ReplicationOffset: res.Offset, CapturedAt: res.Created.UTC(),
		File: file, Bytes: res.Bytes, SHA256: res.SHA256, RDBVersion: res.RDBVersion, Keys: max(res.Keys, 0), KeysWithTTL: max(res.Expires, 0),
	}
	if src.Replica {
		sh.SourceRole = backup.RoleReplica
	}
	for _, rg := range src.Slots {
		sh.Slots = append(sh.Slots, backup.SlotRange{Start: rg.Start, End: rg.End})
	}
	return sh
}
