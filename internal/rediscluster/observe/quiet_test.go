package observe

import (
	"strings"
	"testing"
)

func TestInfoHead(t *testing.T) {
	const head = "cluster_state:ok\r\ncluster_slots_assigned:16384\r\ncluster_slots_ok:16384\r\ncluster_slots_pfail:0\r\ncluster_slots_fail:0\r\ncluster_known_nodes:6\r\ncluster_size:3\r\ncluster_current_epoch:6\r\ncluster_my_epoch:2\r\n"
	for _, tc := range []struct {
		name, reply, want string
	}{
		{"the counters are left out", head + "cluster_stats_messages_ping_sent:1483\r\ncluster_stats_messages_pong_sent:1500\r\n", head},
		{"a reply without counters is kept whole", head, head},
		{"an empty reply", "", ""},
	} {
		if got := keptInfoHead(tc.reply); got != tc.want {
			t.Errorf("%s: keptInfoHead = %q, want %q", tc.name, got, tc.want)
		}
	}
	// Two replies of an unchanged cluster a second apart have the same head; a lost state,
	// a failing slot, another epoch or another node known does not.
	a, b := keptInfoHead(head+"cluster_stats_messages_ping_sent:1\r\n"), keptInfoHead(head+"cluster_stats_messages_ping_sent:2\r\n")
	if a != b {
		t.Errorf("the heads of two replies differing only in counters differ: %q and %q", a, b)
	}
	for from, to := range map[string]string{
		"cluster_state:ok": "cluster_state:fail", "cluster_slots_pfail:0": "cluster_slots_pfail:5461",
		"cluster_current_epoch:6": "cluster_current_epoch:7", "cluster_known_nodes:6": "cluster_known_nodes:7",
	} {
		other := strings.Replace(head, from, to, 1)
		if keptInfoHead(other+"cluster_stats_messages_ping_sent:1\r\n") == a {
			t.Errorf("a reply with %q has the head of the unchanged one", to)
		}
	}
}
