package nodes

import (
	"fmt"
	"math/rand/v2"
	"net"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// TestParseClusterNodesMatchesReference: ParseClusterNodes, which slices its input and
// shares its backing arrays, parses what its first, allocating definition
// (referenceClusterNodes) parses to the same nodes and fails where it fails, on the
// fixtures and on random views with random damage.
func TestParseClusterNodesMatchesReference(t *testing.T) {
	texts := []string{healthyNodes, troubledNodes, "", "\n", healthyNodes + "\n\n" + troubledNodes}
	rng := rand.New(rand.NewPCG(29, 1))
	for range 2000 {
		texts = append(texts, randomClusterNodes(rng))
	}
	for i, text := range texts {
		got, err := ParseClusterNodes(text)
		want, wantErr := referenceClusterNodes(text)
		if (err == nil) != (wantErr == nil) || (err != nil && err.Error() != wantErr.Error()) {
			t.Fatalf("text %d %q: error %v, reference %v", i, text, err, wantErr)
		}
		if len(got) != len(want) {
			t.Fatalf("text %d %q: %d nodes, reference %d", i, text, len(got), len(want))
		}
		for j := range got {
			if !reflect.DeepEqual(got[j], want[j]) {
				t.Fatalf("text %d %q, node %d:\n got %+v\nwant %+v", i, text, j, got[j], want[j])
			}
		}
	}
}

// randomClusterNodes is a CLUSTER NODES reply of one to eight lines drawn from the shapes
// Redis prints (IPv4 and IPv6, hostnames and aux fields, flags, slots, open slots), with one
// field in ten replaced by something malformed.
func randomClusterNodes(rng *rand.Rand) string {
	pick := func(options ...string) string { return options[rng.IntN(len(options))] }
	var lines []string
	for range 1 + rng.IntN(8) {
		fields := []string{
			pick(id1, id2, id3, id4, id5, id6),
			pick("10.0.0.1", "", "fe80::1", "127.0.0.1") + ":" + pick("6379", "06379", "+1", "0", "x") + pick("@16379", "@0", "", "@y") +
				pick("", ",redis-0", ",,shard-id=abc", ",h,tls-port=0,shard-id=x", ","),
			pick("master", "myself,master", "slave", "slave,fail?", "master,fail", "handshake", "myself,slave,noaddr", "noflags", "master,"),
			pick("-", id1, id2),
			strconv.Itoa(rng.IntN(3)), pick("0", "1700000000000", "z"), strconv.Itoa(rng.IntN(9)), pick("connected", "disconnected"),
		}
		for range rng.IntN(4) {
			a := rng.IntN(SlotCount + 2)
			fields = append(fields, pick(strconv.Itoa(a), fmt.Sprintf("%d-%d", a, a+rng.IntN(100)-10),
				fmt.Sprintf("[%d->-%s]", a, id2), fmt.Sprintf("[%d-<-%s]", a, id3), "[5=>x]"))
		}
		if rng.IntN(10) == 0 {
			fields = fields[:rng.IntN(len(fields))]
		}
		lines = append(lines, strings.Join(fields, pick(" ", "  ", "\t")))
	}
	return strings.Join(lines, pick("\n", "\r\n")) + pick("", "\n", "\r\n", "\n\n")
}

// referenceClusterNodes is ParseClusterNodes as first written: strings.Fields and
// strings.Split per line, every slice and address its own allocation (the parsers of the
// fields within, which did not change, are shared). Kept as the reference the faster parser
// is checked against.
func referenceClusterNodes(text string) ([]Node, error) {
	var nodes []Node
	for i, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		n, err := referenceNodeLine(line)
		if err != nil {
			return nil, fmt.Errorf("while parsing CLUSTER NODES line %d %q: %w", i+1, line, err)
		}
		nodes = append(nodes, n)
	}
	return nodes, nil
}

func referenceNodeLine(line string) (Node, error) {
	f := strings.Fields(line)
	if len(f) < 8 {
		return Node{}, fmt.Errorf("expected at least 8 fields, got %d", len(f))
	}
	n := Node{ID: f[0], LinkState: f[7]}
	if err := referenceAddr(&n, f[1]); err != nil {
		return Node{}, err
	}
	n.Flags = strings.Split(f[2], ",")
	for _, flag := range n.Flags {
		n.setFlag(flag)
	}
	if err := n.parseLinks(f[3], f[4], f[5], f[6]); err != nil {
		return Node{}, err
	}
	for _, s := range f[8:] {
		if err := n.parseSlot(s, &n.Slots); err != nil {
			return Node{}, err
		}
	}
	return n, nil
}

func referenceAddr(n *Node, s string) error {
	parts := strings.Split(s, ",")
	for i, p := range parts[1:] {
		n.setExtra(i, p)
	}
	if _, err := n.parseEndpoint(parts[0], s); err != nil {
		return err
	}
	n.Addr = net.JoinHostPort(n.Host, strconv.Itoa(n.Port))
	return nil
}
