package health

import (
	"strconv"

	"github.com/middleware-operator/middleware-operator/internal/rediscluster/observe"
)

// RefusingWrites names the pods of the masters serving slots that refuse writes because
// min-replicas-to-write is on and too few replicas acknowledged their stream in time
// (observe.GoodReplicasField below it), and the replicas each has in good standing.
func RefusingWrites(s observe.Snapshot) []string {
	var out []string
	for _, o := range s.Joined() {
		self, _ := o.Self()
		good, on := o.Replication[observe.GoodReplicasField]
		if !on || !self.IsMaster() || len(self.Slots) == 0 {
			continue
		}
		if n, err := strconv.Atoi(good); err == nil && n < 1 {
			out = append(out, o.Pod)
		}
	}
	return out
}
