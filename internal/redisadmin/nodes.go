package redisadmin

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

// Len returns the number of slots in the range.
func (r SlotRange) Len() int { return r.End - r.Start + 1 }

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
		n += r.Len()
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

// hasFlag reports whether the node has flag f.
func (n *Node) hasFlag(f string) bool { return slices.Contains(n.Flags, f) }

// IsMaster reports whether the node is a master.
func (n *Node) IsMaster() bool { return n.Role == RoleMaster }

// hasOpenSlots reports whether the node has slots in importing or migrating state.
func (n *Node) hasOpenSlots() bool { return len(n.Migrating)+len(n.Importing) > 0 }

// parseClusterNodes parses the output of CLUSTER NODES.
func parseClusterNodes(text string) ([]Node, error) {
	var nodes []Node
	for i, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		n, err := parseNodeLine(line)
		if err != nil {
			return nil, fmt.Errorf("while parsing CLUSTER NODES line %d %q: %w", i+1, line, err)
		}
		nodes = append(nodes, n)
	}
	return nodes, nil
}

// parseNodeLine parses
// "<id> <ip:port@cport[,hostname[,aux=val...]]> <flags> <master> <ping-sent> <pong-recv>
// <config-epoch> <link-state> <slot>...".
func parseNodeLine(line string) (Node, error) {
	f := strings.Fields(line)
	if len(f) < 8 {
		return Node{}, fmt.Errorf("expected at least 8 fields, got %d", len(f))
	}
	n := Node{ID: f[0], LinkState: f[7]}
	if err := n.parseAddr(f[1]); err != nil {
		return Node{}, err
	}
	n.parseFlags(f[2])
	if f[3] != "-" {
		n.MasterID = f[3]
	}
	var err error
	if n.PingSent, err = strconv.ParseInt(f[4], 10, 64); err != nil {
		return Node{}, fmt.Errorf("bad ping-sent %q: %w", f[4], err)
	}
	if n.PongRecv, err = strconv.ParseInt(f[5], 10, 64); err != nil {
		return Node{}, fmt.Errorf("bad pong-recv %q: %w", f[5], err)
	}
	if n.ConfigEpoch, err = strconv.ParseInt(f[6], 10, 64); err != nil {
		return Node{}, fmt.Errorf("bad config-epoch %q: %w", f[6], err)
	}
	for _, s := range f[8:] {
		if err := n.parseSlot(s); err != nil {
			return Node{}, err
		}
	}
	return n, nil
}

// parseAddr parses "ip:port@cport[,hostname[,key=value...]]". The IP may be empty, and may
// be an IPv6 address printed without brackets.
func (n *Node) parseAddr(s string) error {
	parts := strings.Split(s, ",")
	for i, p := range parts[1:] {
		if k, v, ok := strings.Cut(p, "="); ok {
			if n.Aux == nil {
				n.Aux = map[string]string{}
			}
			n.Aux[k] = v
		} else if i == 0 {
			n.Hostname = p
		}
	}
	hostPort, bus, hasBus := strings.Cut(parts[0], "@")
	colon := strings.LastIndexByte(hostPort, ':')
	if colon < 0 {
		return fmt.Errorf("address %q has no port", s)
	}
	port, err := strconv.Atoi(hostPort[colon+1:])
	if err != nil {
		return fmt.Errorf("bad port in address %q: %w", s, err)
	}
	if hasBus {
		if n.BusPort, err = strconv.Atoi(bus); err != nil {
			return fmt.Errorf("bad cluster bus port in address %q: %w", s, err)
		}
	}
	n.Host, n.Port = hostPort[:colon], port
	n.Addr = net.JoinHostPort(n.Host, strconv.Itoa(port))
	return nil
}

func (n *Node) parseFlags(s string) {
	n.Flags = strings.Split(s, ",")
	for _, flag := range n.Flags {
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
}

// parseSlot parses "5461", "0-5460", "[42->-<id>]" (migrating) or "[42-<-<id>]" (importing).
func (n *Node) parseSlot(s string) error {
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
	n.Slots = append(n.Slots, SlotRange{Start: a, End: b})
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
	info := map[string]string{}
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if k, v, ok := strings.Cut(line, ":"); ok {
			info[k] = v
		}
	}
	return info
}
