package layout

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/middleware-operator/middleware-operator/internal/rediscluster/nodes"
)

func endpoints(hosts ...string) []Endpoint {
	out := make([]Endpoint, len(hosts))
	for i, h := range hosts {
		out[i] = Endpoint{Addr: fmt.Sprintf("10.0.0.%d:6379", i+1), Host: h}
	}
	return out
}

func TestSplitSlotsMatchesRedisCli(t *testing.T) {
	// Reference values come from redis-cli's own loop (clusterManagerCommandCreate), compiled
	// in C: the ranges of the first masters, and a hash of every range end
	// (h = h*31 + last, in uint64).
	tests := map[int]struct {
		first []string
		hash  uint64
	}{
		3:     {[]string{"0-5460", "5461-10922", "10923-16383"}, 5602025},
		4:     {[]string{"0-4095", "4096-8191", "8192-12287", "12288-16383"}, 130262976},
		5:     {[]string{"0-3276", "3277-6553", "6554-9829", "9830-13106", "13107-16383"}, 3230543557},
		6:     {[]string{"0-2730", "2731-5460", "5461-8191", "8192-10922", "10923-13652", "13653-16383"}, 83454960608},
		7:     {[]string{"0-2340", "2341-4680", "4681-7021", "7022-9361"}, 2217517652019},
		9:     {[]string{"0-1819", "1820-3640", "3641-5460", "5461-7281"}, 1656617674470731},
		10:    {[]string{"0-1637", "1638-3276", "3277-4914", "4915-6553"}, 46216989246413472},
		11:    {[]string{"0-1488", "1489-2978", "2979-4467", "4468-5957"}, 1302324716906945893},
		13:    {[]string{"0-1259", "1260-2520", "2521-3780", "3781-5040"}, 7469435205203549013},
		50:    {[]string{"0-327", "328-654", "655-982", "983-1310"}, 17638962442646386016},
		100:   {[]string{"0-163", "164-327", "328-491", "492-654"}, 17266755938443165376},
		127:   {[]string{"0-128", "129-257", "258-386", "387-515"}, 14446656405704910879},
		200:   {[]string{"0-81", "82-163", "164-245", "246-327"}, 16546114520388794240},
		1000:  {[]string{"0-15", "16-32", "33-48", "49-65"}, 17804241933911355649},
		16384: {[]string{"0", "1", "2", "3"}, 12808666453104402432},
	}
	for masters, tc := range tests {
		t.Run(fmt.Sprint(masters), func(t *testing.T) {
			got := splitSlots(masters)
			if len(got) != masters {
				t.Fatalf("got %d ranges, want %d", len(got), masters)
			}
			for i, want := range tc.first {
				if got[i].String() != want {
					t.Errorf("range %d = %s, want %s", i, got[i], want)
				}
			}
			var h uint64
			next := 0
			for _, r := range got {
				if r.Start != next {
					t.Fatalf("range %s does not start at %d", r, next)
				}
				next = r.End + 1
				h = h*31 + uint64(r.End)
			}
			if next != nodes.SlotCount {
				t.Errorf("ranges end at %d, want %d", next-1, nodes.SlotCount-1)
			}
			if h != tc.hash {
				t.Errorf("hash of range ends = %d, want %d (redis-cli)", h, tc.hash)
			}
		})
	}
}

func TestPlanCreate(t *testing.T) {
	tests := map[string]struct {
		nodes    []Endpoint
		replicas int
		// want is one line per master: "master-addr slots replica-addr..."
		want    []string
		wantErr string
	}{
		"six nodes on three hosts, one replica each": {
			nodes:    endpoints("a", "a", "b", "b", "c", "c"),
			replicas: 1,
			want: []string{
				"10.0.0.5:6379 0-5460 10.0.0.4:6379",
				"10.0.0.3:6379 5461-10922 10.0.0.2:6379",
				"10.0.0.1:6379 10923-16383 10.0.0.6:6379",
			},
		},
		"seven nodes make three masters and four replicas": {
			nodes:    endpoints("a", "b", "c", "a", "b", "c", "a"),
			replicas: 1,
			want: []string{
				"10.0.0.1:6379 0-5460 10.0.0.5:6379 10.0.0.6:6379",
				"10.0.0.2:6379 5461-10922 10.0.0.4:6379",
				"10.0.0.3:6379 10923-16383 10.0.0.7:6379",
			},
		},
		"no replicas": {
			nodes: endpoints("a", "a", "a"),
			want: []string{
				"10.0.0.1:6379 0-5460",
				"10.0.0.2:6379 5461-10922",
				"10.0.0.3:6379 10923-16383",
			},
		},
		"empty hosts fall back to the IP": {
			nodes: []Endpoint{
				{Addr: "10.0.0.1:7000"}, {Addr: "10.0.0.1:7001"}, {Addr: "10.0.0.2:7000"},
				{Addr: "10.0.0.2:7001"}, {Addr: "10.0.0.3:7000"}, {Addr: "10.0.0.3:7001"},
			},
			replicas: 1,
			want: []string{
				"10.0.0.3:7000 0-5460 10.0.0.2:7001",
				"10.0.0.2:7000 5461-10922 10.0.0.1:7001",
				"10.0.0.1:7000 10923-16383 10.0.0.3:7001",
			},
		},
		"too few nodes": {
			nodes:    endpoints("a", "b", "c", "d", "e"),
			replicas: 1,
			wantErr:  "5 nodes with 1 replicas per master make 2 masters, Redis Cluster needs at least 3 masters, so at least 6 nodes",
		},
		"negative replicas": {
			nodes:    endpoints("a", "b", "c"),
			replicas: -1,
			wantErr:  "must not be negative",
		},
		"duplicate address": {
			nodes:   []Endpoint{{Addr: "x:1"}, {Addr: "x:2"}, {Addr: "x:1"}},
			wantErr: "address x:1 appears twice",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			plan, err := Create(tc.nodes, tc.replicas)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if err := plan.Validate(); err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, m := range plan.Masters {
				line := m.Addr + " " + nodes.FormatSlotRanges(m.Slots)
				for _, r := range m.Replicas {
					line += " " + r.Addr
				}
				got = append(got, line)
			}
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("plan:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}

func TestPlanValidate(t *testing.T) {
	good, err := Create(endpoints("a", "b", "c"), 0)
	if err != nil {
		t.Fatal(err)
	}
	tests := map[string]struct {
		mutate  func(p *Plan)
		wantErr string
	}{
		"valid":                  {mutate: func(*Plan) {}},
		"two masters":            {mutate: func(p *Plan) { p.Masters = p.Masters[:2] }, wantErr: "2 masters"},
		"slot missing":           {mutate: func(p *Plan) { p.Masters[2].Slots[0].End-- }, wantErr: "slot 16383 is given to no master"},
		"slot twice":             {mutate: func(p *Plan) { p.Masters[1].Slots[0].Start-- }, wantErr: "slot 5460 is given to both"},
		"out of range":           {mutate: func(p *Plan) { p.Masters[2].Slots[0].End = nodes.SlotCount }, wantErr: "bad slot range"},
		"duplicate node":         {mutate: func(p *Plan) { p.Masters[0].Replicas = []Endpoint{p.Masters[1].Endpoint} }, wantErr: "appears twice"},
		"master no slots":        {mutate: func(p *Plan) { p.Masters[0].Slots = nil }, wantErr: "has no slots"},
		"empty address":          {mutate: func(p *Plan) { p.Masters[0].Addr = "" }, wantErr: "no address"},
		"reversed range":         {mutate: func(p *Plan) { p.Masters[0].Slots[0] = nodes.SlotRange{Start: 5460, End: 0} }, wantErr: "bad slot range"},
		"extra replica is valid": {mutate: func(p *Plan) { p.Masters[0].Replicas = []Endpoint{{Addr: "r:1"}} }},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			p := clonePlan(good)
			tc.mutate(&p)
			err := p.Validate()
			if tc.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error = %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}

func clonePlan(p Plan) Plan {
	out := Plan{Masters: make([]MasterPlan, len(p.Masters))}
	for i, m := range p.Masters {
		out.Masters[i] = MasterPlan{
			Endpoint: m.Endpoint,
			Slots:    append([]nodes.SlotRange(nil), m.Slots...),
			Replicas: append([]Endpoint(nil), m.Replicas...),
		}
	}
	return out
}

// hostOf returns the failure domain of e as Create sees it.
func hostOf(e Endpoint) string {
	if e.Host != "" {
		return e.Host
	}
	return strings.Split(e.Addr, ":")[0]
}

// coLocated counts the replicas that share their master's host.
func coLocated(shards [][]Endpoint) int {
	n := 0
	for _, s := range shards {
		for _, r := range s[1:] {
			if hostOf(r) == hostOf(s[0]) {
				n++
			}
		}
	}
	return n
}

func shardsOf(p Plan) [][]Endpoint {
	out := make([][]Endpoint, len(p.Masters))
	for i, m := range p.Masters {
		out[i] = append([]Endpoint{m.Endpoint}, m.Replicas...)
	}
	return out
}

// TestPlanCreateProperties checks random layouts: every slot covered once, the right number
// of masters, every node used once, replicas spread evenly, and no swap of two nodes that
// would put fewer replicas on their master's host.
func TestPlanCreateProperties(t *testing.T) {
	seed := uint64(20240611)
	rng := rand.New(rand.NewPCG(seed, seed))
	for iter := range 400 {
		n := 3 + rng.IntN(198)
		replicas := rng.IntN(4)
		hostCount := 1 + rng.IntN(n)
		if rng.IntN(3) == 0 {
			hostCount = 1 + rng.IntN(4) // few hosts: co-location often forced
		}
		eps := make([]Endpoint, n)
		for i := range eps {
			eps[i] = Endpoint{Addr: fmt.Sprintf("10.1.%d.%d:6379", i/250, i%250), Host: fmt.Sprintf("h%d", rng.IntN(hostCount))}
		}
		name := fmt.Sprintf("iter %d: %d nodes, %d replicas, %d hosts", iter, n, replicas, hostCount)
		plan, err := Create(eps, replicas)
		masters := n / (1 + replicas)
		if masters < minMasters {
			if err == nil {
				t.Fatalf("%s: want an error for %d masters", name, masters)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(plan.Masters) != masters {
			t.Fatalf("%s: %d masters, want %d", name, len(plan.Masters), masters)
		}
		var covered [nodes.SlotCount]int
		for _, m := range plan.Masters {
			for _, r := range m.Slots {
				for s := r.Start; s <= r.End; s++ {
					covered[s]++
				}
			}
		}
		for s, c := range covered {
			if c != 1 {
				t.Fatalf("%s: slot %d covered %d times", name, s, c)
			}
		}
		used := map[string]int{}
		for _, e := range plan.Endpoints() {
			used[e.Addr]++
		}
		for _, e := range eps {
			if used[e.Addr] != 1 {
				t.Fatalf("%s: node %s used %d times", name, e.Addr, used[e.Addr])
			}
		}
		if len(used) != n {
			t.Fatalf("%s: plan uses %d nodes, want %d", name, len(used), n)
		}
		extra := n - masters*(1+replicas)
		for i, m := range plan.Masters {
			want := replicas
			if i < extra {
				want++
			}
			if len(m.Replicas) != want {
				t.Fatalf("%s: master %d has %d replicas, want %d", name, i, len(m.Replicas), want)
			}
		}
		// No single swap of two nodes lowers the number of co-located replicas.
		shards := shardsOf(plan)
		base := coLocated(shards)
		if base > 0 {
			assertNoBetterSwap(t, name, shards, base)
		}
		hosts := map[string]int{}
		for _, e := range eps {
			hosts[e.Host]++
		}
		if base > 0 && len(hosts) == n {
			t.Fatalf("%s: %d replicas on their master's host though every node has its own host", name, base)
		}
	}
}

func assertNoBetterSwap(t *testing.T, name string, shards [][]Endpoint, base int) {
	t.Helper()
	type pos struct{ s, i int }
	var all []pos
	for s, shard := range shards {
		for i := range shard {
			all = append(all, pos{s, i})
		}
	}
	for x, a := range all {
		for _, b := range all[x+1:] {
			shards[a.s][a.i], shards[b.s][b.i] = shards[b.s][b.i], shards[a.s][a.i]
			c := coLocated(shards)
			shards[a.s][a.i], shards[b.s][b.i] = shards[b.s][b.i], shards[a.s][a.i]
			if c < base {
				t.Fatalf("%s: swapping %s and %s gives %d co-located replicas instead of %d",
					name, shards[a.s][a.i].Addr, shards[b.s][b.i].Addr, c, base)
			}
		}
	}
}

// TestPlanCreateOptimalSmall compares Create with every possible layout of small
// clusters: no layout puts fewer replicas on their master's host.
func TestPlanCreateOptimalSmall(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	for iter := range 60 {
		replicas := 1 + rng.IntN(2)
		n := 3*(1+replicas) + rng.IntN(3)
		if n > 9 {
			n = 9
		}
		hostCount := 2 + rng.IntN(3)
		nodes := make([]Endpoint, n)
		for i := range nodes {
			nodes[i] = Endpoint{Addr: fmt.Sprintf("10.2.0.%d:6379", i), Host: fmt.Sprintf("h%d", rng.IntN(hostCount))}
		}
		plan, err := Create(nodes, replicas)
		if err != nil {
			t.Fatal(err)
		}
		got := coLocated(shardsOf(plan))
		best := bestCoLocation(shardsOf(plan))
		if got != best {
			t.Errorf("iter %d (%v, %d replicas): %d co-located replicas, the best layout has %d", iter, nodes, replicas, got, best)
		}
	}
}

// bestCoLocation tries every permutation of the nodes over the shards' positions.
func bestCoLocation(shards [][]Endpoint) int {
	var flat []Endpoint
	for _, s := range shards {
		flat = append(flat, s...)
	}
	best := len(flat)
	var permute func(k int)
	permute = func(k int) {
		if k == len(flat) {
			i := 0
			for _, s := range shards {
				copy(s, flat[i:i+len(s)])
				i += len(s)
			}
			best = min(best, coLocated(shards))
			return
		}
		for j := k; j < len(flat); j++ {
			flat[k], flat[j] = flat[j], flat[k]
			permute(k + 1)
			flat[k], flat[j] = flat[j], flat[k]
		}
	}
	permute(0)
	return best
}
