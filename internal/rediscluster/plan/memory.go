package plan

import (
	"fmt"
	"strings"

	"github.com/middleware-operator/middleware-operator/internal/rediscluster/health"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/observe"
)

// StepSetMemory sets Step.Memory (maxmemory and maxmemory-policy) on the nodes at Addrs
// with CONFIG SET, without a restart.
const StepSetMemory StepKind = "SetMemory"

// Memory is the memory configuration of a node: maxmemory and maxmemory-policy.
type Memory struct {
	// MaxMemory is maxmemory in bytes, 0 for none.
	MaxMemory int64
	// Policy is maxmemory-policy; "" when not known (nothing is set then).
	Policy string
	// KeepMaxMemory leaves maxmemory as the nodes have it (the user's redis.conf sets a
	// value the operator could not read); Policy is still set.
	KeepMaxMemory bool
}

// planMemory sets maxmemory and maxmemory-policy on the answering nodes that run with other
// values than Desired.Memory (a change of spec.memory, of the user's redis.conf or of the
// memory limit's share), so no node restarts for it. A pod on an old template is left
// alone: its memory limit may be another one, and the upgrade replaces it with the new
// configuration.
func planMemory(spec Desired, s observe.Snapshot, _ health.Health) (Step, bool) {
	want := spec.Memory
	if want.Policy == "" {
		return Step{}, false
	}
	var addrs, pods []string
	for _, o := range s.Answering() {
		have := observe.MemoryOf(o)
		if !have.Known || (spec.UpdateRevision != "" && o.Revision != spec.UpdateRevision) {
			continue
		}
		if have.Policy != want.Policy || (!want.KeepMaxMemory && have.MaxMemory != want.MaxMemory) {
			addrs, pods = append(addrs, o.Addr), append(pods, o.Pod)
		}
	}
	if len(addrs) == 0 {
		return Step{}, false
	}
	return Step{Kind: StepSetMemory, Addrs: addrs, Memory: want, After: LookSoon,
		Reason: fmt.Sprintf("setting %s on %s", want, strings.Join(pods, ", "))}, true
}

// String names the settings m sets, for messages.
func (m Memory) String() string {
	if m.KeepMaxMemory {
		return "maxmemory-policy " + m.Policy
	}
	return fmt.Sprintf("maxmemory %d and maxmemory-policy %s", m.MaxMemory, m.Policy)
}
