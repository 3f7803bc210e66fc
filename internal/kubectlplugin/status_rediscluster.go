package kubectlplugin

import (
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
)

// slotRangesShown is how many of a master's slot ranges its row shows.
const slotRangesShown = 3

// RedisClusterView is what the status of a RedisCluster shows, as read from the API server.
type RedisClusterView struct {
	// Cluster is the RedisCluster, its status included.
	Cluster *redisv1alpha1.RedisCluster
	// Zones are the zones of the Kubernetes nodes, by node name (empty when the nodes
	// cannot be read).
	Zones map[string]string
	// LastBackup is the RedisBackup of the cluster completed last, or nil.
	LastBackup *redisv1alpha1.RedisBackup
	// Events are the cluster's events.
	Events []corev1.Event
}

// RenderRedisCluster writes the status screen of a RedisCluster as of now.
func RenderRedisCluster(v RedisClusterView, p Palette, now time.Time) string {
	rc := v.Cluster
	st := rc.Status
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s/%s  phase %s  %d masters, %d/%d nodes ready  slots %d assigned, %d ok\n",
		p.Title("RedisCluster"), rc.Namespace, rc.Name, phaseColour(p, string(st.Phase)), st.Masters,
		st.ReadyReplicas, rc.Spec.Replicas, st.SlotsAssigned, st.SlotsOK)
	if st.Reason != "" {
		fmt.Fprintf(&b, "Reason: %s\n", cut(st.Reason, 2*messageWidth))
	}
	if st.ObservedGeneration != 0 && st.ObservedGeneration != rc.Generation {
		fmt.Fprintf(&b, "%s\n", p.Warn(fmt.Sprintf("The status is of generation %d; the spec is at %d.", st.ObservedGeneration, rc.Generation)))
	}
	if m := st.Memory; m != nil {
		line := "Memory: maxmemory " + maxMemoryText(m.MaxMemory)
		if m.Source != "" || m.Policy != "" {
			line += fmt.Sprintf(" (from %s, policy %s)", orDash(string(m.Source)), orDash(m.Policy))
		}
		if m.FullestMaster != "" && m.FullestMasterPercent != nil {
			line += fmt.Sprintf(", fullest master %s at %d%%", m.FullestMaster, *m.FullestMasterPercent)
		}
		b.WriteString(line + "\n")
	}
	if r := st.Restore; r != nil {
		done := "in progress"
		if r.CompletedAt != nil {
			done = "completed " + Age(now.Sub(r.CompletedAt.Time)) + " ago"
		}
		fmt.Fprintf(&b, "Restore: from %s, %d/%d shards loaded, %d keys, %s\n", r.Location, len(r.LoadedShards), r.Shards, r.Keys, done)
	}
	if r := st.Reload; r != nil {
		fmt.Fprintf(&b, "%s\n", p.Warn(fmt.Sprintf("Reload: lost slots %s from backup %s, shards loaded %v", r.Slots, r.Backup, r.LoadedShards)))
	}
	b.WriteString(lastBackupLine(p, v.LastBackup, now) + "\n\n")

	writeMasters(&b, p, v)
	b.WriteString("\n")
	writeNodes(&b, p, v)
	b.WriteString("\n")
	writeConditions(&b, p, st.Conditions, now)
	b.WriteString("\n")
	writeEvents(&b, p, v.Events, now)
	return b.String()
}

// writeMasters writes one row per master: its slots, memory against maxmemory, where it
// runs and its replicas with their replication state.
func writeMasters(b *strings.Builder, p Palette, v RedisClusterView) {
	b.WriteString(p.Title("Masters") + "\n")
	nodes := v.Cluster.Status.Nodes
	byID := map[string]redisv1alpha1.RedisNode{}
	for _, n := range nodes {
		if n.NodeID != "" {
			byID[n.NodeID] = n
		}
	}
	rows := [][]string{{"MASTER", "SLOTS", "MEMORY", "KUBE NODE", "ZONE", "REPLICAS"}}
	for _, m := range nodes {
		if m.Type != "master" {
			continue
		}
		var replicas []string
		for _, r := range nodes {
			if r.Type == "slave" && r.MasterNodeID == m.NodeID {
				replicas = append(replicas, r.Name+" "+replicationState(p, r))
			}
		}
		slices.Sort(replicas)
		rows = append(rows, []string{m.Name, CompactSlots(m.Slots, slotRangesShown), memoryText(p, m),
			orDash(m.Hostname), orDash(v.Zones[m.Hostname]), orDash(strings.Join(replicas, ", "))})
	}
	if len(rows) == 1 {
		b.WriteString("  none yet (no node has joined the cluster)\n")
		return
	}
	table(b, rows)
}

// writeNodes writes one row per node (pod): role, master, address, placement and health.
func writeNodes(b *strings.Builder, p Palette, v RedisClusterView) {
	b.WriteString(p.Title("Nodes") + "\n")
	nodes := v.Cluster.Status.Nodes
	if len(nodes) == 0 {
		b.WriteString("  none yet\n")
		return
	}
	names := map[string]string{}
	for _, n := range nodes {
		if n.NodeID != "" {
			names[n.NodeID] = n.Name
		}
	}
	rows := [][]string{{"POD", "ROLE", "MASTER", "INSTANCE", "KUBE NODE", "ZONE", "STATUS", "REASON"}}
	for _, n := range nodes {
		master := "-"
		if n.Type == "slave" {
			master = orDash(names[n.MasterNodeID])
		}
		rows = append(rows, []string{n.Name, orDash(n.Type), master, orDash(n.Instance), orDash(n.Hostname),
			orDash(v.Zones[n.Hostname]), p.Status(string(n.Status), false), orDash(n.Reason)})
	}
	table(b, rows)
}

// replicationState is a replica's state in brackets: in sync when its status is True,
// else its reason.
func replicationState(p Palette, r redisv1alpha1.RedisNode) string {
	if r.Status == corev1.ConditionTrue {
		return "(" + p.Good("in sync") + ")"
	}
	return "(" + p.Bad(orDash(r.Reason)) + ")"
}

// memoryText is a master's used memory against its maxmemory: "12% of 256.0Mi", or its
// maxmemory alone, or "no maxmemory".
func memoryText(p Palette, n redisv1alpha1.RedisNode) string {
	if n.MaxMemory == 0 {
		return "no maxmemory"
	}
	if n.MemoryPercent == nil {
		return "? of " + Bytes(n.MaxMemory)
	}
	pct := fmt.Sprintf("%d%%", *n.MemoryPercent)
	switch {
	case *n.MemoryPercent >= 90:
		pct = p.Bad(pct)
	case *n.MemoryPercent >= 75:
		pct = p.Warn(pct)
	}
	return pct + " of " + Bytes(n.MaxMemory)
}

func maxMemoryText(n int64) string {
	if n == 0 {
		return "none"
	}
	return Bytes(n)
}

// lastBackupLine says which backup of the cluster completed last and how long ago.
func lastBackupLine(p Palette, b *redisv1alpha1.RedisBackup, now time.Time) string {
	if b == nil || b.Status.CompletedAt == nil {
		return "Last backup: " + p.Warn("none completed")
	}
	return fmt.Sprintf("Last backup: %s, completed %s ago (%d keys, %s) at %s", b.Name,
		Age(now.Sub(b.Status.CompletedAt.Time)), b.Status.Keys, Bytes(b.Status.Bytes), orDash(b.Status.Location))
}

// LastCompletedBackup returns the backup of cluster that completed last, or nil.
func LastCompletedBackup(backups []redisv1alpha1.RedisBackup, cluster string) *redisv1alpha1.RedisBackup {
	var last *redisv1alpha1.RedisBackup
	for i := range backups {
		b := &backups[i]
		if b.Spec.Cluster != cluster || b.Status.Phase != redisv1alpha1.BackupCompleted || b.Status.CompletedAt == nil {
			continue
		}
		if last == nil || b.Status.CompletedAt.After(last.Status.CompletedAt.Time) {
			last = b
		}
	}
	return last
}

// phaseColour colours a phase: Running, Ready and Available green, Failed and Degraded red,
// the rest yellow.
func phaseColour(p Palette, phase string) string {
	switch phase {
	case "Running", "Ready", "Available", "Succeeded":
		return p.Good(phase)
	case "Failed", "Degraded":
		return p.Bad(phase)
	case "":
		return p.Warn("-")
	}
	return p.Warn(phase)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
