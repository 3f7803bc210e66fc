package backup

import (
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The manifest's identity.
const (
	// Kind is the manifest's "kind": what the JSON is.
	Kind = "RedisClusterBackup"
	// FormatVersion is the version of the format this package writes and reads.
	FormatVersion = 1
	// ManifestName is the manifest's object name in a backup's directory.
	ManifestName = "manifest.json"
	// Slots is the number of hash slots of a Redis cluster.
	Slots = 16384
	// minRDBBytes is the size of an RDB of an empty database (header, EOF, checksum).
	minRDBBytes = 18
)

// Manifest describes one backup of a RedisCluster.
type Manifest struct {
	// Kind is always Kind, and FormatVersion the format's version.
	Kind          string `json:"kind"`
	FormatVersion int    `json:"formatVersion"`
	// Cluster is the RedisCluster the backup was taken from.
	Cluster ClusterRef `json:"cluster"`
	// RedisVersion is the version the source's nodes ran (redis-ver of the RDBs).
	RedisVersion string `json:"redisVersion"`
	// StartedAt and CompletedAt bound the backup: the slot map was checked stable at both.
	StartedAt   time.Time `json:"startedAt"`
	CompletedAt time.Time `json:"completedAt"`
	// Shards are the masters' slot sets and their files, in the order of their first slot.
	// Together their slots are the 16384 slots, each once.
	Shards []Shard `json:"shards"`
}

// ClusterRef names the source RedisCluster.
type ClusterRef struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// UID tells a cluster from a later one of the same name.
	UID string `json:"uid,omitempty"`
}

// Shard is one master's slots and the RDB file that holds their keys.
type Shard struct {
	// Slots are the slot ranges the shard's master served, sorted.
	Slots []SlotRange `json:"slots"`
	// MasterNodeID is the master's node ID; SourceNodeID the node the RDB was taken from (a
	// replica in sync with it, or the master itself), whose role SourceRole says.
	MasterNodeID string `json:"masterNodeId"`
	SourceNodeID string `json:"sourceNodeId"`
	SourceRole   Role   `json:"sourceRole"`
	// ReplicationID and ReplicationOffset are the point of the shard's replication history
	// the file holds: every write up to that offset, none after.
	ReplicationID     string `json:"replicationId"`
	ReplicationOffset int64  `json:"replicationOffset"`
	// CapturedAt is when the source node started writing the snapshot, by its clock.
	CapturedAt time.Time `json:"capturedAt"`
	// File is the RDB's object name, relative to the manifest's directory.
	File string `json:"file"`
	// Bytes and SHA256 (lower-case hex) identify the file's content.
	Bytes  int64  `json:"bytes"`
	SHA256 string `json:"sha256"`
	// RDBVersion is the file's RDB format version: a restore needs a Redis that reads it.
	RDBVersion int `json:"rdbVersion"`
	// Keys is the number of keys in the file and KeysWithTTL how many of them expire, as the
	// source counted them at the snapshot.
	Keys        int64 `json:"keys"`
	KeysWithTTL int64 `json:"keysWithTTL"`
}

// Role is a node's role when its snapshot was taken.
type Role string

// The roles.
const (
	RoleMaster  Role = "master"
	RoleReplica Role = "replica"
)

// SlotRange is an inclusive range of hash slots.
type SlotRange struct {
	Start int `json:"start"`
	End   int `json:"end"`
}

// String returns the range as Redis prints it: "0-5460", or "5461" for one slot.
func (r SlotRange) String() string {
	if r.Start == r.End {
		return strconv.Itoa(r.Start)
	}
	return strconv.Itoa(r.Start) + "-" + strconv.Itoa(r.End)
}

// ShardFile is the object name of the shard at index (in slot order).
func ShardFile(index int) string { return fmt.Sprintf("shard-%03d.rdb", index) }

// Marshal validates m and returns its JSON, indented.
func (m *Manifest) Marshal() ([]byte, error) {
	if err := m.Validate(); err != nil {
		return nil, err
	}
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(data, '\n'), nil
}

// Parse reads a manifest and validates it. A manifest of another kind or format version is
// refused; fields this version does not know are ignored.
func Parse(data []byte) (*Manifest, error) {
	var head struct {
		Kind          string `json:"kind"`
		FormatVersion int    `json:"formatVersion"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		return nil, fmt.Errorf("the manifest is not JSON: %w", err)
	}
	if head.Kind != Kind {
		return nil, fmt.Errorf("the manifest's kind is %q, not %s", head.Kind, Kind)
	}
	if head.FormatVersion != FormatVersion {
		return nil, fmt.Errorf("the manifest is of format version %d; this operator reads version %d", head.FormatVersion, FormatVersion)
	}
	m := &Manifest{}
	if err := json.Unmarshal(data, m); err != nil {
		return nil, fmt.Errorf("the manifest: %w", err)
	}
	if err := m.Validate(); err != nil {
		return nil, err
	}
	return m, nil
}

var (
	nodeID = regexp.MustCompile(`^[0-9a-f]{40}$`)
	sha256 = regexp.MustCompile(`^[0-9a-f]{64}$`)
)

// Validate returns every problem of m, joined, or nil.
func (m *Manifest) Validate() error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if m.Kind != Kind || m.FormatVersion != FormatVersion {
		add("kind %q version %d, want %s version %d", m.Kind, m.FormatVersion, Kind, FormatVersion)
	}
	if m.Cluster.Namespace == "" || m.Cluster.Name == "" {
		add("the cluster's namespace and name are required")
	}
	if m.StartedAt.IsZero() || m.CompletedAt.Before(m.StartedAt) {
		add("completedAt %s is not at or after startedAt %s", m.CompletedAt.Format(time.RFC3339), m.StartedAt.Format(time.RFC3339))
	}
	if len(m.Shards) == 0 {
		add("no shards")
	}
	owner := make([]int, Slots) // shard index + 1 of each slot, 0 for none
	files := map[string]bool{}
	for i, s := range m.Shards {
		for _, e := range s.problems() {
			add("shard %d: %s", i, e)
		}
		if files[s.File] {
			add("shard %d: file %q is another shard's too", i, s.File)
		}
		files[s.File] = true
		for _, r := range s.Slots {
			for slot := max(r.Start, 0); slot <= min(r.End, Slots-1); slot++ {
				if owner[slot] != 0 {
					add("slot %d is in shard %d and shard %d", slot, owner[slot]-1, i)
					break
				}
				owner[slot] = i + 1
			}
		}
		if i > 0 && len(s.Slots) > 0 && len(m.Shards[i-1].Slots) > 0 && s.Slots[0].Start < m.Shards[i-1].Slots[0].Start {
			add("shard %d comes before shard %d in slot order", i, i-1)
		}
	}
	if missing := slices.Index(owner, 0); missing >= 0 && len(m.Shards) > 0 {
		add("slot %d is in no shard: a backup holds all %d", missing, Slots)
	}
	return errors.Join(errs...)
}

// problems lists what is wrong with one shard.
func (s Shard) problems() []string {
	var out []string
	if len(s.Slots) == 0 {
		out = append(out, "no slots")
	}
	for i, r := range s.Slots {
		switch {
		case r.Start < 0 || r.End >= Slots || r.Start > r.End:
			out = append(out, fmt.Sprintf("slot range %s is not within 0-%d", r, Slots-1))
		case i > 0 && r.Start <= s.Slots[i-1].End:
			out = append(out, fmt.Sprintf("slot range %s overlaps or precedes %s", r, s.Slots[i-1]))
		}
	}
	if !nodeID.MatchString(s.MasterNodeID) || !nodeID.MatchString(s.SourceNodeID) {
		out = append(out, fmt.Sprintf("node IDs %q and %q must be 40 lower-case hex digits", s.MasterNodeID, s.SourceNodeID))
	}
	switch {
	case s.SourceRole == RoleMaster && s.SourceNodeID != s.MasterNodeID:
		out = append(out, "a snapshot taken from the master names another node as its source")
	case s.SourceRole == RoleReplica && s.SourceNodeID == s.MasterNodeID:
		out = append(out, "a snapshot taken from a replica names the master as its source")
	case s.SourceRole != RoleMaster && s.SourceRole != RoleReplica:
		out = append(out, fmt.Sprintf("source role %q is neither master nor replica", s.SourceRole))
	}
	if s.ReplicationID == "" || s.ReplicationOffset < 0 {
		out = append(out, "the replication ID and a non-negative offset are required")
	}
	if s.File == "" || path.IsAbs(s.File) || path.Clean(s.File) != s.File || strings.HasPrefix(s.File, "..") {
		out = append(out, fmt.Sprintf("file %q must be a clean name relative to the manifest", s.File))
	}
	if s.Bytes < minRDBBytes || !sha256.MatchString(s.SHA256) {
		out = append(out, fmt.Sprintf("size %d and SHA-256 %q do not describe an RDB", s.Bytes, s.SHA256))
	}
	if s.RDBVersion < 1 {
		out = append(out, "the RDB version is required")
	}
	if s.Keys < 0 || s.KeysWithTTL < 0 || s.KeysWithTTL > s.Keys {
		out = append(out, fmt.Sprintf("%d keys of which %d with a TTL", s.Keys, s.KeysWithTTL))
	}
	return out
}

// ShardOf returns the index of the shard that holds slot, or -1.
func (m *Manifest) ShardOf(slot int) int {
	for i, s := range m.Shards {
		for _, r := range s.Slots {
			if slot >= r.Start && slot <= r.End {
				return i
			}
		}
	}
	return -1
}

// Keys is the number of keys in all shards.
func (m *Manifest) Keys() int64 { return sum(m.Shards, func(s Shard) int64 { return s.Keys }) }

// Bytes is the size of all the shards' files.
func (m *Manifest) Bytes() int64 { return sum(m.Shards, func(s Shard) int64 { return s.Bytes }) }

// RDBVersion is the highest RDB version of the files: a restore needs a Redis that reads it.
func (m *Manifest) RDBVersion() int {
	v := 0
	for _, s := range m.Shards {
		v = max(v, s.RDBVersion)
	}
	return v
}

func sum(shards []Shard, f func(Shard) int64) int64 {
	var n int64
	for _, s := range shards {
		n += f(s)
	}
	return n
}
