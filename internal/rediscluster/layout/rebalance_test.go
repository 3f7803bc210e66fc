package layout

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/middleware-operator/middleware-operator/internal/rediscluster/nodes"
)

// master returns a master with id and ranges.
func master(id string, ranges ...nodes.SlotRange) nodes.Node {
	return nodes.Node{ID: id, Addr: id + ":6379", Host: id, Port: 6379, Role: nodes.RoleMaster, Slots: ranges}
}

// describeMoves renders moves as "source>target:ranges".
func describeMoves(moves []Move) []string {
	out := make([]string, len(moves))
	for i, m := range moves {
		out[i] = m.Source + ">" + m.Target + ":" + nodes.FormatSlotRanges(nodes.RangesOf(m.Slots))
	}
	return out
}

// threeMasters is the cluster `redis-cli --cluster create` makes of three masters.
func threeMasters() []nodes.Node {
	return []nodes.Node{master("A", nodes.SlotRange{Start: 0, End: 5460}), master("B", nodes.SlotRange{Start: 5461, End: 10922}), master("C", nodes.SlotRange{Start: 10923, End: 16383})}
}

func TestPlanRebalance(t *testing.T) {
	tests := map[string]struct {
		masters   []nodes.Node
		weights   map[string]float64
		threshold float64
		useEmpty  bool
		pinned    []int
		full      []string
		want      []string
		wantErr   string
	}{
		// 8194 slots, as the issue measured redis-cli moving from 3 to 6 masters.
		"three to six masters": {
			masters:   append(threeMasters(), master("D"), master("E"), master("F")),
			threshold: 2, useEmpty: true,
			want: []string{"B>D:5461-8192", "C>E:10923-13653", "A>F:0-2730"},
		},
		"three to five masters": {
			masters:   append(threeMasters(), master("D"), master("E")),
			threshold: 2, useEmpty: true,
			want: []string{"B>D:5461-7646", "C>D:10923-12014", "C>E:12015-13107", "A>E:0-2184"},
		},
		"giant slots pinned: their masters give their next slots instead": {
			masters:   append(threeMasters(), master("D")),
			threshold: 2, useEmpty: true, pinned: []int{0, 5461, 10923},
			want: []string{"B>D:5462-6827", "C>D:10924-12288", "A>D:1-1365"},
		},
		"a master with only pinned slots left gives what it can": {
			masters:   []nodes.Node{master("A", nodes.SlotRange{Start: 0, End: 3}), master("B", nodes.SlotRange{Start: 4, End: 16383})},
			threshold: 2, pinned: []int{0, 1, 2, 3, 4, 5},
			want: []string{"B>A:6-8193"},
		},
		"a full master below its share keeps its slots, the others share the rest": {
			masters:   []nodes.Node{master("A", nodes.SlotRange{Start: 0, End: 9999}), master("B", nodes.SlotRange{Start: 10000, End: 13999}), master("C", nodes.SlotRange{Start: 14000, End: 16383})},
			threshold: 2, full: []string{"B"},
			want: []string{"A>C:0-3807"},
		},
		"a full master above its share gives as before": {
			masters:   []nodes.Node{master("A", nodes.SlotRange{Start: 0, End: 9999}), master("B", nodes.SlotRange{Start: 10000, End: 13999}), master("C", nodes.SlotRange{Start: 14000, End: 16383})},
			threshold: 2, full: []string{"A"},
			want: []string{"A>C:0-3076", "A>B:3077-4538"},
		},
		"leaving one full master out can leave the next out too (C is above 5461, below 7192)": {
			masters:   []nodes.Node{master("A", nodes.SlotRange{Start: 0, End: 7999}), master("B", nodes.SlotRange{Start: 8000, End: 9999}), master("C", nodes.SlotRange{Start: 10000, End: 16383})},
			threshold: 2, full: []string{"B", "C"},
		},
		"a draining master whose only receiver is full: nothing moves": {
			masters:   []nodes.Node{master("A", nodes.SlotRange{Start: 0, End: 8191}), master("B", nodes.SlotRange{Start: 8192, End: 16383})},
			weights:   map[string]float64{"B": 0},
			threshold: 2, full: []string{"A"},
		},
		"empty masters ignored without useEmptyMasters": {
			masters:   append(threeMasters(), master("D")),
			threshold: 2,
		},
		"balanced": {
			masters:   threeMasters(),
			threshold: 2,
		},
		"threshold 0 never rebalances, as in redis-cli": {
			masters:   append(threeMasters(), master("D")),
			threshold: 0, useEmpty: true,
		},
		"within the threshold": {
			masters:   []nodes.Node{master("A", nodes.SlotRange{Start: 0, End: 8250}), master("B", nodes.SlotRange{Start: 8251, End: 16383})},
			threshold: 2,
		},
		"over the threshold": {
			masters:   []nodes.Node{master("A", nodes.SlotRange{Start: 0, End: 8400}), master("B", nodes.SlotRange{Start: 8401, End: 16383})},
			threshold: 2,
			want:      []string{"A>B:0-208"},
		},
		"weight 0 drains a master": {
			masters:   threeMasters(),
			weights:   map[string]float64{"C": 0},
			threshold: 2,
			want:      []string{"C>A:10923-13653", "C>B:13654-16383"},
		},
		"weights": {
			masters:   threeMasters(),
			weights:   map[string]float64{"A": 2},
			threshold: 2,
			want:      []string{"B>A:5461-6826", "C>A:10923-12287"},
		},
		"replicas are skipped": {
			masters:   append(threeMasters(), nodes.Node{ID: "R", Role: nodes.RoleSlave, MasterID: "A"}, master("D")),
			threshold: 2, useEmpty: true,
			want: []string{"B>D:5461-6826", "C>D:10923-12287", "A>D:0-1364"},
		},
		"uncovered slots": {
			masters:   []nodes.Node{master("A", nodes.SlotRange{Start: 0, End: 100})},
			threshold: 2,
			wantErr:   "served by none",
		},
		"unknown weight": {
			masters:   threeMasters(),
			weights:   map[string]float64{"Z": 1},
			threshold: 2,
			wantErr:   "no such master Z",
		},
		"negative weight": {
			masters:   threeMasters(),
			weights:   map[string]float64{"A": -1},
			threshold: 2,
			wantErr:   "not a number >= 0",
		},
		"all weights zero": {
			masters:   threeMasters(),
			weights:   map[string]float64{"A": 0, "B": 0, "C": 0},
			threshold: 2,
			wantErr:   "add up to 0",
		},
		"slot served twice": {
			masters:   append(threeMasters(), master("D", nodes.SlotRange{Start: 5, End: 5})),
			threshold: 2,
			wantErr:   "slot 5 is served by two masters",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			moves, err := Rebalance(tc.masters, tc.weights, tc.threshold, tc.useEmpty, tc.pinned, tc.full)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := describeMoves(moves); !slices.Equal(got, tc.want) {
				t.Errorf("moves = %q, want %q", got, tc.want)
			}
		})
	}
}

// randomMasters splits the slots among n masters at random cut points; some get none.
func randomMasters(rng *rand.Rand, n int) []nodes.Node {
	cuts := []int{0, nodes.SlotCount}
	for range n - 1 {
		cuts = append(cuts, rng.IntN(nodes.SlotCount+1))
	}
	slices.Sort(cuts)
	masters := make([]nodes.Node, n)
	for i := range masters {
		masters[i] = master(fmt.Sprintf("m%d", i))
		if cuts[i+1] > cuts[i] {
			masters[i].Slots = []nodes.SlotRange{{Start: cuts[i], End: cuts[i+1] - 1}}
		}
	}
	rng.Shuffle(len(masters), func(i, j int) { masters[i], masters[j] = masters[j], masters[i] })
	// Scatter some slots so that masters hold several ranges.
	for range rng.IntN(200) {
		a, b := rng.IntN(n), rng.IntN(n)
		if a == b || len(masters[a].Slots) == 0 {
			continue
		}
		slots := nodes.SlotList(masters[a].Slots)
		s := slots[rng.IntN(len(slots))]
		masters[a].Slots = nodes.RangesOf(slices.DeleteFunc(slots, func(x int) bool { return x == s }))
		masters[b].Slots = nodes.RangesOf(append(nodes.SlotList(masters[b].Slots), s))
	}
	return masters
}

// applyMoves checks that each move takes slots its source serves and returns the slot
// counts afterwards.
func applyMoves(t *testing.T, masters []nodes.Node, moves []Move) map[string][]int {
	t.Helper()
	owner := map[int]string{}
	for _, m := range masters {
		for _, s := range nodes.SlotList(m.Slots) {
			owner[s] = m.ID
		}
	}
	moved := map[int]bool{}
	for _, mv := range moves {
		if mv.Source == mv.Target || len(mv.Slots) == 0 {
			t.Fatalf("bad move %v", mv)
		}
		for _, s := range mv.Slots {
			if owner[s] != mv.Source {
				t.Fatalf("move %v: slot %d is served by %q", mv, s, owner[s])
			}
			if moved[s] {
				t.Fatalf("slot %d moved twice", s)
			}
			moved[s] = true
			owner[s] = mv.Target
		}
	}
	out := map[string][]int{}
	for s := range nodes.SlotCount {
		out[owner[s]] = append(out[owner[s]], s)
	}
	return out
}

// TestPlanRebalanceProperties checks random clusters and weights: moves take slots their
// source serves, no slot moves twice, givers and receivers are distinct nodes, every
// involved master ends at or just above its expected share, and a second plan on the
// result has nothing to do.
func TestPlanRebalanceProperties(t *testing.T) {
	seed := uint64(20260901)
	rng := rand.New(rand.NewPCG(seed, seed))
	for iter := range 400 {
		n := 1 + rng.IntN(12)
		masters := randomMasters(rng, n)
		weights := map[string]float64{}
		for _, m := range masters {
			switch rng.IntN(6) {
			case 0:
				weights[m.ID] = 0
			case 1:
				weights[m.ID] = 0.5 + rng.Float64()*2
			}
		}
		useEmpty := rng.IntN(2) == 0
		name := fmt.Sprintf("iteration %d (seed %d)", iter, seed)
		moves, err := Rebalance(masters, weights, 2, useEmpty, nil, nil)
		if err != nil {
			if strings.Contains(err.Error(), "add up to 0") {
				continue
			}
			t.Fatalf("%s: %v", name, err)
		}
		after := applyMoves(t, masters, moves)
		givers, takers := map[string]bool{}, map[string]bool{}
		for _, mv := range moves {
			givers[mv.Source], takers[mv.Target] = true, true
		}
		for id := range givers {
			if takers[id] {
				t.Fatalf("%s: %s both gives and receives: %v", name, id, describeMoves(moves))
			}
		}
		var total float64
		var involved []nodes.Node
		for _, m := range masters {
			if useEmpty || len(m.Slots) > 0 {
				w, ok := weights[m.ID]
				if !ok {
					w = 1
				}
				total += w
				involved = append(involved, m)
			} else if len(after[m.ID]) > 0 {
				t.Fatalf("%s: empty master %s received slots without useEmptyMasters", name, m.ID)
			}
		}
		if len(moves) == 0 {
			continue
		}
		for _, m := range involved {
			w, ok := weights[m.ID]
			if !ok {
				w = 1
			}
			expected := int(float32(float32(nodes.SlotCount)/float32(total)) * float32(w))
			got := len(after[m.ID])
			if got < expected || got > expected+len(involved) {
				t.Fatalf("%s: %s ends with %d slots, expected %d (+ at most %d for rounding)", name, m.ID, got, expected, len(involved))
			}
		}
		// Planning again on the result moves nothing when shares are large enough for 2%.
		var again []nodes.Node
		for _, m := range masters {
			again = append(again, master(m.ID, nodes.RangesOf(after[m.ID])...))
		}
		minShare := math.Inf(1)
		for _, m := range involved {
			if w, ok := weights[m.ID]; !ok || w > 0 {
				minShare = min(minShare, float64(len(after[m.ID])))
			}
		}
		if minShare > 100*float64(len(involved)) {
			second, err := Rebalance(again, weights, 2, useEmpty, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(second) > 0 {
				t.Fatalf("%s: a second plan moves %v", name, describeMoves(second))
			}
		}
	}
}

func TestPlanReshard(t *testing.T) {
	four := append(threeMasters(), master("D"))
	tests := map[string]struct {
		masters []nodes.Node
		n       int
		from    []string
		to      string
		want    []string
		wantErr string
	}{
		"from all": {
			masters: four, n: 100, to: "D",
			// B serves 5462 slots, the others 5461: B first (ceil), then A and C (floor).
			want: []string{"B>D:5461-5494", "A>D:0-32", "C>D:10923-10955"},
		},
		"from one": {
			masters: four, n: 10, from: []string{"C"}, to: "D",
			want: []string{"C>D:10923-10932"},
		},
		"exact shares": {
			masters: []nodes.Node{master("A", nodes.SlotRange{Start: 0, End: 9}), master("B", nodes.SlotRange{Start: 10, End: 19}), master("C", nodes.SlotRange{Start: 20, End: 16383}), master("D")},
			n:       2, from: []string{"A", "B"}, to: "D",
			want: []string{"A>D:0", "B>D:10"},
		},
		"top-up after floor": {
			masters: []nodes.Node{master("A", nodes.SlotRange{Start: 0, End: 9}), master("B", nodes.SlotRange{Start: 10, End: 19}), master("C", nodes.SlotRange{Start: 20, End: 29}), master("D", nodes.SlotRange{Start: 30, End: 16383})},
			n:       2, from: []string{"A", "B", "C"}, to: "D",
			// redis-cli moves only A's slot 0 (ceil 0.67 = 1, floor 0.67 = 0, 0): topped up from A.
			want: []string{"A>D:0-1"},
		},
		"target among sources": {
			masters: four, n: 1, from: []string{"D"}, to: "D", wantErr: "both source and target",
		},
		"unknown target": {
			masters: four, n: 1, to: "Z", wantErr: "not known or not a master",
		},
		"too many": {
			masters: four, n: 6000, from: []string{"A"}, to: "D", wantErr: "fewer than the 6000",
		},
		"zero": {
			masters: four, n: 0, to: "D", wantErr: "not within",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			moves, err := Reshard(tc.masters, tc.n, tc.from, tc.to)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := describeMoves(moves); !slices.Equal(got, tc.want) {
				t.Errorf("moves = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestPlanReshardProperties checks random reshards move exactly n slots, each the lowest
// ones its source serves, from the named sources only, to the target.
func TestPlanReshardProperties(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 11))
	for iter := range 300 {
		masters := randomMasters(rng, 2+rng.IntN(10))
		to := masters[rng.IntN(len(masters))].ID
		var from []string
		total := 0
		for _, m := range masters {
			if m.ID != to && rng.IntN(2) == 0 {
				from = append(from, m.ID)
				total += nodes.CountSlots(m.Slots)
			}
		}
		if total == 0 {
			continue
		}
		n := 1 + rng.IntN(total)
		moves, err := Reshard(masters, n, from, to)
		if err != nil {
			t.Fatalf("iteration %d: %v", iter, err)
		}
		applyMoves(t, masters, moves)
		if got := CountMoved(moves); got != n {
			t.Fatalf("iteration %d: moves %d slots, want %d", iter, got, n)
		}
		for _, mv := range moves {
			if mv.Target != to || !slices.Contains(from, mv.Source) {
				t.Fatalf("iteration %d: move %v not from %v to %s", iter, mv, from, to)
			}
			var src nodes.Node
			for _, m := range masters {
				if m.ID == mv.Source {
					src = m
				}
			}
			if want := nodes.SlotList(src.Slots)[:len(mv.Slots)]; !slices.Equal(mv.Slots, want) {
				t.Fatalf("iteration %d: move %v does not take the lowest slots of its source", iter, mv)
			}
		}
	}
}

func TestSlotRangesAndMoves(t *testing.T) {
	got := nodes.FormatSlotRanges(nodes.RangesOf([]int{5, 1, 2, 3, 9, 10, 2}))
	if got != "1-3,5,9-10" {
		t.Errorf("slotRanges = %s", got)
	}
	if got := nodes.SlotList([]nodes.SlotRange{{Start: 5, End: 6}, {Start: 1, End: 2}}); !slices.Equal(got, []int{1, 2, 5, 6}) {
		t.Errorf("slotList = %v", got)
	}
	if s := (Move{Source: "a", Target: "b", Slots: []int{1, 2}}).String(); s != "2 slots (1-2) from a to b" {
		t.Errorf("Move.String = %q", s)
	}
}
