package redis

import "testing"

func healNode(id, addr string, myself bool, slots ...SlotRange) Node {
	n := Node{ID: id, Addr: addr, Myself: myself, Role: RoleMaster, Slots: slots}
	if myself {
		n.Flags = []string{"myself", "master"}
	} else {
		n.Flags = []string{"master"}
	}
	return n
}

func TestPlanHeal(t *testing.T) {
	a, b, c := "10.0.0.1:6379", "10.0.0.2:6379", "10.0.0.3:6379"
	cases := map[string]struct {
		views map[string][]Node
		want  []Introduction
	}{
		"healthy cluster needs nothing": {
			views: map[string][]Node{
				a: {healNode("A", a, true, SlotRange{0, 100}), healNode("B", b, false), healNode("C", c, false)},
				b: {healNode("A", a, false), healNode("B", b, true, SlotRange{101, 200}), healNode("C", c, false)},
				c: {healNode("A", a, false), healNode("B", b, false), healNode("C", c, true, SlotRange{201, 300})},
			},
		},
		"every address changed": {
			views: map[string][]Node{
				a: {healNode("A", a, true, SlotRange{0, 100}), healNode("B", "9.9.9.2:6379", false), healNode("C", "9.9.9.3:6379", false)},
				b: {healNode("A", "9.9.9.1:6379", false), healNode("B", b, true, SlotRange{101, 200}), healNode("C", "9.9.9.3:6379", false)},
				c: {healNode("A", "9.9.9.1:6379", false), healNode("B", "9.9.9.2:6379", false), healNode("C", c, true, SlotRange{201, 300})},
			},
			want: []Introduction{{a, b}, {b, a}, {a, c}, {c, a}},
		},
		"a new empty node is not pulled in": {
			views: map[string][]Node{
				a: {healNode("A", a, true, SlotRange{0, 100}), healNode("B", b, false)},
				b: {healNode("A", a, false), healNode("B", b, true, SlotRange{101, 200})},
				c: {healNode("C", c, true)},
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := PlanHeal(tc.views)
			if len(got) != len(tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Errorf("introduction %d = %v, want %v", i, got[i], tc.want[i])
				}
			}
			if (len(tc.want) == 0) != Converged(tc.views) {
				t.Errorf("Converged = %v, want %v", Converged(tc.views), len(tc.want) == 0)
			}
		})
	}
}
