package nodes

import (
	"reflect"
	"strings"
	"testing"
)

const (
	id1 = "e7d1eecce10fd6bb5eb35b9f99a514335d9ba9ca"
	id2 = "67ed2db8d677e59ec4a4cefb06858cf2a1a89fa1"
	id3 = "292f8b365bb7edb5e285caf0b7e6ddc7265d2f4f"
	id4 = "07c37dfeb235213a872192d90877d0cd55635b91"
	id5 = "6ec23923021cf3ffec47632106199cb7f496ce01"
	id6 = "824fe116063bc5fcf9f4ffd895bc17aee7731ac3"
)

// A healthy cluster of six nodes as node 1 prints it (Redis 7.0, with hostnames).
var healthyNodes = strings.Join([]string{
	id4 + " 127.0.0.1:30004@31004,redis-3 slave " + id1 + " 0 1426238317239 4 connected",
	id2 + " 127.0.0.1:30002@31002,redis-1 master - 0 1426238316232 2 connected 5461-10922",
	id3 + " 127.0.0.1:30003@31003,redis-2 master - 0 1426238318243 3 connected 10923-16383",
	id5 + " 127.0.0.1:30005@31005,redis-4 slave " + id2 + " 0 1426238316232 5 connected",
	id6 + " 127.0.0.1:30006@31006,redis-5 slave " + id3 + " 0 1426238317741 6 connected",
	id1 + " 127.0.0.1:30001@31001,redis-0 myself,master - 0 0 1 connected 0-5460",
}, "\n") + "\n"

// A cluster in trouble: node 1 migrates a slot to node 2 (which imports it), a master has
// failed, a replica is possibly failing, slots are listed one by one.
var troubledNodes = strings.Join([]string{
	id1 + " 10.0.0.1:6379@16379 myself,master - 0 0 7 connected 0-5459 5460 [5460->-" + id2 + "] [100-<-" + id3 + "]",
	id2 + " 10.0.0.2:6379@16379 master - 0 1700000000000 8 connected 5461-10922",
	id3 + " 10.0.0.3:6379@16379 master,fail - 1700000000100 1700000000000 3 disconnected 10923-16383",
	id4 + " 10.0.0.4:6379@16379 slave,fail? " + id1 + " 1700000000100 1700000000000 7 disconnected",
	id5 + " :0@0 slave,noaddr " + id2 + " 0 0 8 disconnected",
	id6 + " fe80::1:6380@16380,,shard-id=abc handshake - 0 0 0 connected",
}, "\r\n")

func TestParseClusterNodes(t *testing.T) {
	tests := map[string]struct {
		text string
		want []Node
	}{
		"healthy": {
			text: healthyNodes,
			want: []Node{
				{ID: id4, Addr: "127.0.0.1:30004", Host: "127.0.0.1", Port: 30004, BusPort: 31004, Hostname: "redis-3",
					Flags: []string{"slave"}, Role: RoleSlave, MasterID: id1, PongRecv: 1426238317239, ConfigEpoch: 4,
					LinkState: "connected"},
				{ID: id2, Addr: "127.0.0.1:30002", Host: "127.0.0.1", Port: 30002, BusPort: 31002, Hostname: "redis-1",
					Flags: []string{"master"}, Role: RoleMaster, PongRecv: 1426238316232, ConfigEpoch: 2,
					LinkState: "connected", Slots: []SlotRange{{5461, 10922}}},
				{ID: id3, Addr: "127.0.0.1:30003", Host: "127.0.0.1", Port: 30003, BusPort: 31003, Hostname: "redis-2",
					Flags: []string{"master"}, Role: RoleMaster, PongRecv: 1426238318243, ConfigEpoch: 3,
					LinkState: "connected", Slots: []SlotRange{{10923, 16383}}},
				{ID: id5, Addr: "127.0.0.1:30005", Host: "127.0.0.1", Port: 30005, BusPort: 31005, Hostname: "redis-4",
					Flags: []string{"slave"}, Role: RoleSlave, MasterID: id2, PongRecv: 1426238316232, ConfigEpoch: 5,
					LinkState: "connected"},
				{ID: id6, Addr: "127.0.0.1:30006", Host: "127.0.0.1", Port: 30006, BusPort: 31006, Hostname: "redis-5",
					Flags: []string{"slave"}, Role: RoleSlave, MasterID: id3, PongRecv: 1426238317741, ConfigEpoch: 6,
					LinkState: "connected"},
				{ID: id1, Addr: "127.0.0.1:30001", Host: "127.0.0.1", Port: 30001, BusPort: 31001, Hostname: "redis-0",
					Flags: []string{"myself", "master"}, Role: RoleMaster, ConfigEpoch: 1, LinkState: "connected",
					Slots: []SlotRange{{0, 5460}}, Myself: true},
			},
		},
		"open slots, failures, noaddr, IPv6 and aux fields": {
			text: troubledNodes,
			want: []Node{
				{ID: id1, Addr: "10.0.0.1:6379", Host: "10.0.0.1", Port: 6379, BusPort: 16379,
					Flags: []string{"myself", "master"}, Role: RoleMaster, ConfigEpoch: 7, LinkState: "connected",
					Slots: []SlotRange{{0, 5459}, {5460, 5460}}, Migrating: map[int]string{5460: id2},
					Importing: map[int]string{100: id3}, Myself: true},
				{ID: id2, Addr: "10.0.0.2:6379", Host: "10.0.0.2", Port: 6379, BusPort: 16379,
					Flags: []string{"master"}, Role: RoleMaster, PongRecv: 1700000000000, ConfigEpoch: 8,
					LinkState: "connected", Slots: []SlotRange{{5461, 10922}}},
				{ID: id3, Addr: "10.0.0.3:6379", Host: "10.0.0.3", Port: 6379, BusPort: 16379,
					Flags: []string{"master", "fail"}, Role: RoleMaster, PingSent: 1700000000100, PongRecv: 1700000000000,
					ConfigEpoch: 3, LinkState: "disconnected", Slots: []SlotRange{{10923, 16383}}, Failed: true},
				{ID: id4, Addr: "10.0.0.4:6379", Host: "10.0.0.4", Port: 6379, BusPort: 16379,
					Flags: []string{"slave", "fail?"}, Role: RoleSlave, MasterID: id1, PingSent: 1700000000100,
					PongRecv: 1700000000000, ConfigEpoch: 7, LinkState: "disconnected", PossiblyFailed: true},
				{ID: id5, Addr: ":0", Port: 0, BusPort: 0, Flags: []string{"slave", "noaddr"}, Role: RoleSlave,
					MasterID: id2, ConfigEpoch: 8, LinkState: "disconnected"},
				{ID: id6, Addr: "[fe80::1]:6380", Host: "fe80::1", Port: 6380, BusPort: 16380,
					Aux: map[string]string{"shard-id": "abc"}, Flags: []string{"handshake"}, LinkState: "connected"},
			},
		},
		"fresh node that does not know its IP yet": {
			text: id1 + " :7000@17000 myself,master - 0 0 0 connected\n",
			want: []Node{{ID: id1, Addr: ":7000", Port: 7000, BusPort: 17000, Flags: []string{"myself", "master"},
				Role: RoleMaster, LinkState: "connected", Myself: true}},
		},
		"empty": {text: "\n", want: nil},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ParseClusterNodes(tc.text)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("got %d nodes, want %d", len(got), len(tc.want))
			}
			for i := range got {
				if !reflect.DeepEqual(got[i], tc.want[i]) {
					t.Errorf("node %d:\n got %+v\nwant %+v", i, got[i], tc.want[i])
				}
			}
		})
	}
}

func TestParseClusterNodesErrors(t *testing.T) {
	tests := map[string]struct {
		line    string
		wantErr string
	}{
		"too few fields":   {line: id1 + " 127.0.0.1:7000@17000 master -", wantErr: "at least 8 fields"},
		"no port":          {line: id1 + " localhost master - 0 0 1 connected", wantErr: "has no port"},
		"bad port":         {line: id1 + " 1.2.3.4:x@1 master - 0 0 1 connected", wantErr: "bad port"},
		"bad bus port":     {line: id1 + " 1.2.3.4:1@y master - 0 0 1 connected", wantErr: "bad cluster bus port"},
		"bad epoch":        {line: id1 + " 1.2.3.4:1@2 master - 0 0 z connected", wantErr: "bad config-epoch"},
		"bad ping":         {line: id1 + " 1.2.3.4:1@2 master - z 0 1 connected", wantErr: "bad ping-sent"},
		"bad pong":         {line: id1 + " 1.2.3.4:1@2 master - 0 z 1 connected", wantErr: "bad pong-recv"},
		"slot too big":     {line: id1 + " 1.2.3.4:1@2 master - 0 0 1 connected 0-16384", wantErr: "out of range"},
		"reversed range":   {line: id1 + " 1.2.3.4:1@2 master - 0 0 1 connected 10-5", wantErr: "bad slot range"},
		"bad open slot":    {line: id1 + " 1.2.3.4:1@2 master - 0 0 1 connected [5=>x]", wantErr: "bad open slot"},
		"bad slot number":  {line: id1 + " 1.2.3.4:1@2 master - 0 0 1 connected a-b", wantErr: "bad slot"},
		"bad migrate slot": {line: id1 + " 1.2.3.4:1@2 master - 0 0 1 connected [x->-" + id2 + "]", wantErr: "bad slot"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := ParseClusterNodes(healthyNodes + tc.line + "\n")
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error = %v, want one containing %q", err, tc.wantErr)
			}
			if !strings.Contains(err.Error(), "line 7") {
				t.Errorf("error %q does not name the line", err)
			}
		})
	}
}

func TestNodeHelpers(t *testing.T) {
	nodes, err := ParseClusterNodes(troubledNodes)
	if err != nil {
		t.Fatal(err)
	}
	tests := map[string]struct {
		got, want bool
	}{
		"myself has open slots":   {nodes[0].HasOpenSlots(), true},
		"master 2 has none":       {nodes[1].HasOpenSlots(), false},
		"master 1 is a master":    {nodes[0].IsMaster(), true},
		"replica is not a master": {nodes[3].IsMaster(), false},
		"handshake has no role":   {nodes[5].IsMaster() || nodes[5].Role != "", false},
		"noaddr flag":             {nodes[4].HasFlag("noaddr"), true},
		"no fail flag on myself":  {nodes[0].HasFlag("fail"), false},
	}
	for name, tc := range tests {
		if tc.got != tc.want {
			t.Errorf("%s: got %v, want %v", name, tc.got, tc.want)
		}
	}
}

func TestSlotRanges(t *testing.T) {
	tests := map[string]struct {
		ranges []SlotRange
		want   string
		count  int
	}{
		"empty":     {nil, "", 0},
		"single":    {[]SlotRange{{5461, 5461}}, "5461", 1},
		"range":     {[]SlotRange{{0, 5460}}, "0-5460", 5461},
		"mixed":     {[]SlotRange{{0, 5460}, {5461, 5461}}, "0-5460,5461", 5462},
		"all slots": {[]SlotRange{{0, SlotCount - 1}}, "0-16383", SlotCount},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := FormatSlotRanges(tc.ranges); got != tc.want {
				t.Errorf("FormatSlotRanges = %q, want %q", got, tc.want)
			}
			if got := CountSlots(tc.ranges); got != tc.count {
				t.Errorf("CountSlots = %d, want %d", got, tc.count)
			}
		})
	}
}

func TestParseClusterInfo(t *testing.T) {
	text := "cluster_state:ok\r\ncluster_slots_assigned:16384\r\ncluster_known_nodes:6\r\n" +
		"# comment\r\ncluster_my_epoch:2\r\n\r\n"
	want := map[string]string{
		"cluster_state": "ok", "cluster_slots_assigned": "16384", "cluster_known_nodes": "6", "cluster_my_epoch": "2",
	}
	if got := ParseClusterInfo(text); !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}
