package nodes

import (
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
)

// SlotCount is the number of hash slots of a Redis Cluster.
const SlotCount = 16384

// Roles a node reports in CLUSTER NODES.
const (
	RoleMaster = "master"
	RoleSlave  = "slave"
)

// SlotRange is an inclusive range of hash slots, as CLUSTER NODES prints it.
type SlotRange struct {
	Start, End int
}

// String returns the range as Redis prints it: "0-5460", or "5461" for a single slot.
func (r SlotRange) String() string {
	if r.Start == r.End {
		return strconv.Itoa(r.Start)
	}
	return strconv.Itoa(r.Start) + "-" + strconv.Itoa(r.End)
}

// count returns the number of slots in the range.
func (r SlotRange) count() int { return r.End - r.Start + 1 }

// FormatSlotRanges joins ranges with commas, as in "0-5460,5461".
func FormatSlotRanges(ranges []SlotRange) string {
	parts := make([]string, len(ranges))
	for i, r := range ranges {
		parts[i] = r.String()
	}
	return strings.Join(parts, ",")
}

// ParseSlotRanges reads what FormatSlotRanges writes.
func ParseSlotRanges(text string) ([]SlotRange, error) {
	var out []SlotRange
	for part := range strings.SplitSeq(text, ",") {
		from, to, isRange := strings.Cut(part, "-")
		if !isRange {
			to = from
		}
		start, err := parseSlotNumber(from)
		if err != nil {
			return nil, err
		}
		end, err := parseSlotNumber(to)
		if err != nil {
			return nil, err
		}
		if end < start {
			return nil, fmt.Errorf("slot range %q ends before it starts", part)
		}
		out = append(out, SlotRange{Start: start, End: end})
	}
	return out, nil
}

// CountSlots returns the number of slots in ranges.
func CountSlots(ranges []SlotRange) int {
	n := 0
	for _, r := range ranges {
		n += r.count()
	}
	return n
}

// Node is one line of CLUSTER NODES: a node as seen by the node that was asked.
type Node struct {
	// ID is the 40-character node ID.
	ID string
	// Addr is Host:Port, as a client dials it; Host is empty while a node has not yet
	// learnt its own IP (a fresh node reports ":6379@16379" for itself).
	Addr string
	// Host is the IP address the node announces.
	Host string
	// Port is the client port.
	Port int
	// BusPort is the cluster bus port.
	BusPort int
	// Hostname is the announced hostname (Redis 7 "ip:port@cport,hostname"), or "".
	Hostname string
	// Aux holds the auxiliary "key=value" fields after the hostname (Redis 7.2+).
	Aux map[string]string
	// Flags are the raw flags: myself, master, slave, fail?, fail, handshake, noaddr, ...
	Flags []string
	// Role is RoleMaster, RoleSlave, or "" when neither flag is set (handshake).
	Role string
	// MasterID is the ID of the master of a replica, "" for a master.
	MasterID string
	// PingSent and PongRecv are the millisecond timestamps of the last ping and pong.
	PingSent, PongRecv int64
	// ConfigEpoch is the node's configuration epoch.
	ConfigEpoch int64
	// LinkState is "connected" or "disconnected".
	LinkState string
	// Slots are the slot ranges the node serves.
	Slots []SlotRange
	// Migrating maps a slot being migrated away to the ID of the destination node.
	Migrating map[int]string
	// Importing maps a slot being imported to the ID of the source node.
	Importing map[int]string
	// Myself is true on the line of the node that was asked.
	Myself bool
	// Failed is true when the node is flagged "fail" (failure agreed by the majority).
	Failed bool
	// PossiblyFailed is true when the node is flagged "fail?" (not reachable from the
	// node that was asked).
	PossiblyFailed bool
}

// HasFlag reports whether the node has flag f.
func (n *Node) HasFlag(f string) bool { return slices.Contains(n.Flags, f) }

// IsMaster reports whether the node is a master.
func (n *Node) IsMaster() bool { return n.Role == RoleMaster }

// HasOpenSlots reports whether the node has slots in importing or migrating state.
func (n *Node) HasOpenSlots() bool { return len(n.Migrating)+len(n.Importing) > 0 }

// ParseClusterNodes parses the output of CLUSTER NODES. Every node's strings are slices of
// text, and the nodes' flags and slot ranges share one backing array each: a look parses
// every node's view every LookIdle, so it allocates a few times per reply, not per field.
func ParseClusterNodes(text string) ([]Node, error) {
	lines := strings.Count(text, "\n") + 1
	nodes := make([]Node, 0, lines)
	p := nodeParser{flags: make([]string, 0, 2*lines), slots: make([]SlotRange, 0, lines)}
	for i := 0; text != ""; i++ {
		var line string
		line, text, _ = strings.Cut(text, "\n")
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		n, err := p.parseNodeLine(line)
		if err != nil {
			return nil, fmt.Errorf("while parsing CLUSTER NODES line %d %q: %w", i+1, line, err)
		}
		nodes = append(nodes, n)
	}
	return nodes, nil
}

// nodeParser holds the backing arrays the nodes of one CLUSTER NODES reply share.
type nodeParser struct {
	flags []string
	slots []SlotRange
}

// nextField splits s at its first run of spaces or tabs: the field before, the rest after.
func nextField(s string) (field, rest string) {
	s = strings.TrimLeft(s, " \t")
	end := strings.IndexAny(s, " \t")
	if end < 0 {
		return s, ""
	}
	return s[:end], s[end:]
}

// parseNodeLine parses
// "<id> <ip:port@cport[,hostname[,aux=val...]]> <flags> <master> <ping-sent> <pong-recv>
// <config-epoch> <link-state> <slot>...".
func (p *nodeParser) parseNodeLine(line string) (Node, error) {
	var f [8]string
	rest := line
	for i := range f {
		if f[i], rest = nextField(rest); f[i] == "" {
			return Node{}, fmt.Errorf("expected at least 8 fields, got %d", i)
		}
	}
	n := Node{ID: f[0], LinkState: f[7]}
	if err := n.parseAddr(f[1]); err != nil {
		return Node{}, err
	}
	p.parseFlags(&n, f[2])
	if err := n.parseLinks(f[3], f[4], f[5], f[6]); err != nil {
		return Node{}, err
	}
	from := len(p.slots)
	for {
		var s string
		if s, rest = nextField(rest); s == "" {
			break
		}
		if err := n.parseSlot(s, &p.slots); err != nil {
			return Node{}, err
		}
	}
	if len(p.slots) > from {
		n.Slots = p.slots[from:len(p.slots):len(p.slots)]
	}
	return n, nil
}

// parseLinks sets the master ID ("-" for none), ping-sent, pong-recv and config-epoch
// fields.
func (n *Node) parseLinks(master, pingSent, pongRecv, epoch string) error {
	if master != "-" {
		n.MasterID = master
	}
	var err error
	if n.PingSent, err = strconv.ParseInt(pingSent, 10, 64); err != nil {
		return fmt.Errorf("bad ping-sent %q: %w", pingSent, err)
	}
	if n.PongRecv, err = strconv.ParseInt(pongRecv, 10, 64); err != nil {
		return fmt.Errorf("bad pong-recv %q: %w", pongRecv, err)
	}
	if n.ConfigEpoch, err = strconv.ParseInt(epoch, 10, 64); err != nil {
		return fmt.Errorf("bad config-epoch %q: %w", epoch, err)
	}
	return nil
}

// parseAddr parses "ip:port@cport[,hostname[,key=value...]]". The IP may be empty, and may
// be an IPv6 address printed without brackets.
func (n *Node) parseAddr(s string) error {
	addr, extra, _ := strings.Cut(s, ",")
	for i := 0; extra != ""; i++ {
		var p string
		p, extra, _ = strings.Cut(extra, ",")
		n.setExtra(i, p)
	}
	hostPort, err := n.parseEndpoint(addr, s)
	if err != nil {
		return err
	}
	if canonicalHostPort(n.Host, hostPort[len(n.Host)+1:]) {
		n.Addr = hostPort // as net.JoinHostPort would print it, without a copy
	} else {
		n.Addr = net.JoinHostPort(n.Host, strconv.Itoa(n.Port))
	}
	return nil
}

// setExtra sets the i-th field after the address's first comma: "key=value" an auxiliary
// field, else the first one the hostname.
func (n *Node) setExtra(i int, field string) {
	if k, v, ok := strings.Cut(field, "="); ok {
		if n.Aux == nil {
			n.Aux = map[string]string{}
		}
		n.Aux[k] = v
	} else if i == 0 {
		n.Hostname = field
	}
}

// parseEndpoint sets Host, Port and BusPort from addr, the "ip:port@cport" part of the
// address field s, and returns its "ip:port".
func (n *Node) parseEndpoint(addr, s string) (string, error) {
	hostPort, bus, hasBus := strings.Cut(addr, "@")
	colon := strings.LastIndexByte(hostPort, ':')
	if colon < 0 {
		return "", fmt.Errorf("address %q has no port", s)
	}
	port, err := strconv.Atoi(hostPort[colon+1:])
	if err != nil {
		return "", fmt.Errorf("bad port in address %q: %w", s, err)
	}
	if hasBus {
		if n.BusPort, err = strconv.Atoi(bus); err != nil {
			return "", fmt.Errorf("bad cluster bus port in address %q: %w", s, err)
		}
	}
	n.Host, n.Port = hostPort[:colon], port
	return hostPort, nil
}

// canonicalHostPort reports whether host:port is what net.JoinHostPort(host,
// strconv.Itoa(port)) returns: host needs no brackets and port has no sign or leading zero.
func canonicalHostPort(host, port string) bool {
	return !strings.Contains(host, ":") && port != "" && port[0] >= '1' && port[0] <= '9'
}

// parseFlags sets n's flags from s ("myself,master"), appending them to p's shared array.
func (p *nodeParser) parseFlags(n *Node, s string) {
	from := len(p.flags)
	for more := true; more; {
		var flag string
		flag, s, more = strings.Cut(s, ",")
		p.flags = append(p.flags, flag)
		n.setFlag(flag)
	}
	n.Flags = p.flags[from:len(p.flags):len(p.flags)]
}

// setFlag sets the fields flag implies (Myself, Role, Failed, PossiblyFailed).
func (n *Node) setFlag(flag string) {
	switch flag {
	case "myself":
		n.Myself = true
	case RoleMaster, RoleSlave:
		n.Role = flag
	case "fail":
		n.Failed = true
	case "fail?":
		n.PossiblyFailed = true
	}
}

// parseSlot parses "5461", "0-5460", "[42->-<id>]" (migrating) or "[42-<-<id>]" (importing).
func (n *Node) parseSlot(s string, slots *[]SlotRange) error {
	if strings.HasPrefix(s, "[") {
		body := strings.TrimSuffix(strings.TrimPrefix(s, "["), "]")
		if slot, id, ok := strings.Cut(body, "->-"); ok {
			num, err := parseSlotNumber(slot)
			if err != nil {
				return err
			}
			if n.Migrating == nil {
				n.Migrating = map[int]string{}
			}
			n.Migrating[num] = id
			return nil
		}
		if slot, id, ok := strings.Cut(body, "-<-"); ok {
			num, err := parseSlotNumber(slot)
			if err != nil {
				return err
			}
			if n.Importing == nil {
				n.Importing = map[int]string{}
			}
			n.Importing[num] = id
			return nil
		}
		return fmt.Errorf("bad open slot %q", s)
	}
	start, end, isRange := strings.Cut(s, "-")
	if !isRange {
		end = start
	}
	a, err := parseSlotNumber(start)
	if err != nil {
		return err
	}
	b, err := parseSlotNumber(end)
	if err != nil {
		return err
	}
	if b < a {
		return fmt.Errorf("bad slot range %q", s)
	}
	*slots = append(*slots, SlotRange{Start: a, End: b})
	return nil
}

func parseSlotNumber(s string) (int, error) {
	v, err := strconv.Atoi(s)
	if err != nil {
		return 0, fmt.Errorf("bad slot %q: %w", s, err)
	}
	if v < 0 || v >= SlotCount {
		return 0, fmt.Errorf("slot %d out of range 0-%d", v, SlotCount-1)
	}
	return v, nil
}

// ParseClusterInfo parses the "key:value" lines of CLUSTER INFO (or INFO).
func ParseClusterInfo(text string) map[string]string {
	return ParseInfoFields(text, func(string) bool { return true })
}

// ParseInfoFields parses the "key:value" lines of CLUSTER INFO or INFO, keeping only the
// fields keep accepts. The values are slices of text.
func ParseInfoFields(text string, keep func(field string) bool) map[string]string {
	info := map[string]string{}
	for text != "" {
		var line string
		line, text, _ = strings.Cut(text, "\n")
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' {
			continue
		}
		if k, v, ok := strings.Cut(line, ":"); ok && keep(k) {
			info[k] = v
		}
	}
	return info
}
