package report

import (
	"strings"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/middleware-operator/middleware-operator/internal/rediscluster/health"
)

// partitioned names the partition h shows (masters cut off from their peers while they
// answer, slots two masters claim), or "" for none.
func partitioned(h health.Health) (reason, message string) {
	var parts []string
	for _, p := range h.Partitions {
		parts = append(parts, p.String())
	}
	parts = append(parts, h.DualClaims...)
	if len(parts) == 0 {
		return "", ""
	}
	return ReasonNetworkPartition, strings.Join(parts, "; ") +
		": Redis fails a master over once the majority has not heard from it for cluster-node-timeout; writes a cut-off master acknowledges meanwhile are lost when it rejoins (see spec.writeSafety)"
}

// reportPartition sends an event when a partition is first seen and when it has ended (the
// Degraded condition of the last status said one, this look sees none).
func reportPartition(s *Input) {
	was := meta.FindStatusCondition(s.Cluster.Status.Conditions, ConditionDegraded)
	before := was != nil && was.Reason == ReasonNetworkPartition
	now := meta.FindStatusCondition(s.Next.Status.Conditions, ConditionDegraded)
	during := now != nil && now.Reason == ReasonNetworkPartition
	switch {
	case during && !before:
		s.report(corev1.EventTypeWarning, ReasonNetworkPartition, "Observe", "%s", clip(now.Message, eventNoteLimit))
	case before && !during && len(s.Snap.Nodes) > 0:
		s.report(corev1.EventTypeNormal, ReasonPartitionEnded, "Observe", "the partition has ended: no answering master is flagged failing or claims another's slots (was: %s)",
			clip(was.Message, eventNoteLimit-120))
	}
}

// eventNoteLimit is the longest event note the API server takes (1 kB), less a margin.
const eventNoteLimit = 1000

// clip cuts s to at most n bytes at a rune boundary, ending it with "..." when cut.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n - 3
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}
