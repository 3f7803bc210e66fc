package backup

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite testdata/manifest-v1.json")

func id(c byte) string { return strings.Repeat(string(c), 40) }

// threeShards is a valid manifest of a cluster of three masters, the first two backed up
// from a replica, the third from its master.
func threeShards() *Manifest {
	start := time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)
	shard := func(i int, slots []SlotRange, master, source byte, role Role, keys int64) Shard {
		return Shard{
			Slots: slots, MasterNodeID: id(master), SourceNodeID: id(source), SourceRole: role,
			ReplicationID: strings.Repeat("f", 40), ReplicationOffset: 1_000_000 + int64(i),
			CapturedAt: start.Add(time.Duration(i+1) * time.Second), File: ShardFile(i),
			Bytes: 1 << 20, SHA256: strings.Repeat(string("abc"[i]), 64), RDBVersion: 10, Keys: keys, KeysWithTTL: keys / 10,
		}
	}
	return &Manifest{
		Kind: Kind, FormatVersion: FormatVersion,
		Cluster:      ClusterRef{Namespace: "shop", Name: "cache", UID: "0b7c2a1e-5d4f-4a8e-9c61-3f2d8e7b6a50"},
		RedisVersion: "7.0.15", StartedAt: start, CompletedAt: start.Add(4 * time.Second),
		Shards: []Shard{
			shard(0, []SlotRange{{0, 5460}}, 'a', 'd', RoleReplica, 333_000),
			shard(1, []SlotRange{{5461, 10922}}, 'b', 'e', RoleReplica, 334_000),
			shard(2, []SlotRange{{10923, 16383}}, 'c', 'c', RoleMaster, 333_000),
		},
	}
}

func TestManifestRoundTrip(t *testing.T) {
	m := threeShards()
	data, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	back, err := Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(m, back) {
		t.Fatalf("round trip changed the manifest:\n%+v\n%+v", m, back)
	}
	if again, _ := back.Marshal(); !bytes.Equal(again, data) {
		t.Fatalf("marshalling the parsed manifest gives other bytes:\n%s\n%s", data, again)
	}
}

// TestManifestFormatIsStable pins the JSON of format version 1: a change to it must be a
// new format version (or an optional field), since backups in buckets outlive the code.
func TestManifestFormatIsStable(t *testing.T) {
	golden := filepath.Join("testdata", "manifest-v1.json")
	data, err := threeShards().Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.WriteFile(golden, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(data, want) {
		t.Fatalf("the manifest's JSON changed (go test -update if that is meant, with a new FormatVersion if not compatible):\n%s", data)
	}
	m, err := Parse(want)
	if err != nil || !reflect.DeepEqual(m, threeShards()) {
		t.Fatalf("the golden manifest parses to %+v, %v", m, err)
	}
}

func TestManifestValidate(t *testing.T) {
	cases := map[string]struct {
		change func(m *Manifest)
		want   string // "" for valid
	}{
		"valid": {change: func(*Manifest) {}},
		"one shard with every slot": {change: func(m *Manifest) {
			m.Shards = m.Shards[:1]
			m.Shards[0].Slots = []SlotRange{{0, 16383}}
		}},
		"slots in several ranges": {change: func(m *Manifest) {
			m.Shards[0].Slots = []SlotRange{{0, 100}, {102, 5460}}
			m.Shards[1].Slots = []SlotRange{{101, 101}, {5461, 10922}}
		}},
		"a missing slot": {change: func(m *Manifest) { m.Shards[2].Slots[0].End = 16382 },
			want: "slot 16383 is in no shard"},
		"a slot twice": {change: func(m *Manifest) { m.Shards[1].Slots[0].Start = 5460 },
			want: "slot 5460 is in shard 0 and shard 1"},
		"a range past the last slot": {change: func(m *Manifest) { m.Shards[2].Slots[0].End = 16384 },
			want: "not within 0-16383"},
		"a reversed range": {change: func(m *Manifest) { m.Shards[0].Slots = []SlotRange{{5460, 0}} },
			want: "slot range 5460-0 is not within"},
		"unsorted ranges": {change: func(m *Manifest) {
			m.Shards[0].Slots = []SlotRange{{3000, 5460}, {0, 2999}}
		}, want: "overlaps or precedes"},
		"shards out of slot order": {change: func(m *Manifest) { m.Shards[0], m.Shards[1] = m.Shards[1], m.Shards[0] },
			want: "shard 1 comes before shard 0"},
		"no shards":         {change: func(m *Manifest) { m.Shards = nil }, want: "no shards"},
		"no cluster name":   {change: func(m *Manifest) { m.Cluster.Name = "" }, want: "namespace and name are required"},
		"completed earlier": {change: func(m *Manifest) { m.CompletedAt = m.StartedAt.Add(-time.Second) }, want: "not at or after startedAt"},
		"a short node ID":   {change: func(m *Manifest) { m.Shards[0].SourceNodeID = "abc" }, want: "40 lower-case hex"},
		"a master source that is another node": {change: func(m *Manifest) { m.Shards[2].SourceNodeID = id('f') },
			want: "names another node"},
		"a replica source that is the master": {change: func(m *Manifest) { m.Shards[0].SourceNodeID = m.Shards[0].MasterNodeID },
			want: "names the master"},
		"an unknown role":      {change: func(m *Manifest) { m.Shards[0].SourceRole = "slave" }, want: "neither master nor replica"},
		"no replication ID":    {change: func(m *Manifest) { m.Shards[0].ReplicationID = "" }, want: "replication ID"},
		"a file outside":       {change: func(m *Manifest) { m.Shards[0].File = "../other/shard-000.rdb" }, want: "clean name relative"},
		"an absolute file":     {change: func(m *Manifest) { m.Shards[0].File = "/shard-000.rdb" }, want: "clean name relative"},
		"a shared file":        {change: func(m *Manifest) { m.Shards[1].File = m.Shards[0].File }, want: "another shard's too"},
		"a bad checksum":       {change: func(m *Manifest) { m.Shards[0].SHA256 = "ABC" }, want: "do not describe an RDB"},
		"too small for an RDB": {change: func(m *Manifest) { m.Shards[0].Bytes = 17 }, want: "do not describe an RDB"},
		"more TTLs than keys":  {change: func(m *Manifest) { m.Shards[0].KeysWithTTL = m.Shards[0].Keys + 1 }, want: "with a TTL"},
		"an empty shard is fine": {change: func(m *Manifest) {
			m.Shards[0].Keys, m.Shards[0].KeysWithTTL, m.Shards[0].Bytes = 0, 0, 18
		}},
		"wrong version": {change: func(m *Manifest) { m.FormatVersion = 2 }, want: "want RedisClusterBackup version 1"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			m := threeShards()
			tc.change(m)
			err := m.Validate()
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate = %v, want an error containing %q", err, tc.want)
			}
			if _, merr := m.Marshal(); merr == nil {
				t.Fatal("Marshal wrote an invalid manifest")
			}
		})
	}
}

func TestParseRefuses(t *testing.T) {
	valid, err := threeShards().Marshal()
	if err != nil {
		t.Fatal(err)
	}
	edit := func(f func(map[string]any)) []byte {
		var v map[string]any
		_ = json.Unmarshal(valid, &v)
		f(v)
		out, _ := json.Marshal(v)
		return out
	}
	cases := map[string]struct {
		data []byte
		want string
	}{
		"not JSON":          {data: []byte("REDIS0010"), want: "not JSON"},
		"another kind":      {data: edit(func(v map[string]any) { v["kind"] = "Backup" }), want: `kind is "Backup"`},
		"a newer format":    {data: edit(func(v map[string]any) { v["formatVersion"] = 2 }), want: "format version 2; this operator reads version 1"},
		"no format version": {data: edit(func(v map[string]any) { delete(v, "formatVersion") }), want: "format version 0"},
		"a wrong type":      {data: edit(func(v map[string]any) { v["shards"] = "three" }), want: "cannot unmarshal"},
		"invalid content": {data: edit(func(v map[string]any) { v["shards"].([]any)[0].(map[string]any)["sha256"] = "x" }),
			want: "do not describe an RDB"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if _, err := Parse(tc.data); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Parse = %v, want an error containing %q", err, tc.want)
			}
		})
	}
	t.Run("an unknown field is ignored", func(t *testing.T) {
		m, err := Parse(edit(func(v map[string]any) { v["compression"] = "none" }))
		if err != nil || !reflect.DeepEqual(m, threeShards()) {
			t.Fatalf("Parse = %+v, %v", m, err)
		}
	})
}

func TestManifestQueries(t *testing.T) {
	m := threeShards()
	for slot, want := range map[int]int{0: 0, 5460: 0, 5461: 1, 12000: 2, 16383: 2, 16384: -1, -1: -1} {
		if got := m.ShardOf(slot); got != want {
			t.Errorf("ShardOf(%d) = %d, want %d", slot, got, want)
		}
	}
	if m.Keys() != 1_000_000 || m.Bytes() != 3<<20 || m.RDBVersion() != 10 {
		t.Errorf("Keys %d, Bytes %d, RDBVersion %d", m.Keys(), m.Bytes(), m.RDBVersion())
	}
	m.Shards[1].RDBVersion = 11
	if m.RDBVersion() != 11 {
		t.Errorf("RDBVersion = %d with one shard of version 11", m.RDBVersion())
	}
	if ShardFile(7) != "shard-007.rdb" || (SlotRange{5, 5}).String() != "5" || (SlotRange{0, 5460}).String() != "0-5460" {
		t.Error("ShardFile or SlotRange.String")
	}
}
