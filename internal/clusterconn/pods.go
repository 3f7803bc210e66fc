package clusterconn

import (
	"net"
	"sort"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/observe"
	"github.com/middleware-operator/middleware-operator/internal/resources"
)

// NodeTimeout is the cluster-node-timeout the generated redis.conf sets.
const NodeTimeout = 5 * time.Second

// PodObservations are rc's pods as the snapshot starts from them, before their nodes are
// read: pods at ordinals from resources.RedisNodes up are leaving; a pod deleted reports a
// pod this process deleted whose deletion the cache does not show yet (terminating, too).
func PodObservations(rc *redisv1alpha1.RedisCluster, pods []corev1.Pod, deleted func(*corev1.Pod) bool) []observe.Observation {
	replicas := resources.RedisNodes(rc)
	obs := make([]observe.Observation, len(pods))
	for i := range pods {
		p := &pods[i]
		// Kubernetes 1.35+ copies the node's zone onto the pod when it is scheduled (the
		// PodTopologyLabels admission plugin), so no Node has to be read.
		obs[i] = observe.Observation{Pod: p.Name, Host: p.Spec.NodeName, Zone: p.Labels[corev1.LabelTopologyZone],
			Leaving: Ordinal(p.Name) >= int(replicas), Running: p.Status.Phase == corev1.PodRunning,
			Unready:     p.Status.Phase == corev1.PodRunning && !PodReady(p),
			Terminating: (deleted != nil && deleted(p)) || !p.DeletionTimestamp.IsZero(), Revision: p.Labels[appsv1.ControllerRevisionHashLabelKey], PodStarted: p.CreationTimestamp.Time}
		if p.Status.StartTime != nil {
			obs[i].PodStarted = p.Status.StartTime.Time
		}
		if p.Status.PodIP != "" && p.Status.Phase == corev1.PodRunning {
			obs[i].Addr = PodAddr(rc, p)
		}
	}
	return obs
}

// SortByOrdinal orders pods by their StatefulSet ordinal.
func SortByOrdinal(pods []corev1.Pod) {
	sort.Slice(pods, func(i, j int) bool { return Ordinal(pods[i].Name) < Ordinal(pods[j].Name) })
}

// Ordinal is the StatefulSet ordinal a pod's (or a claim's) name ends with.
func Ordinal(pod string) int {
	n, _ := strconv.Atoi(pod[strings.LastIndex(pod, "-")+1:])
	return n
}

// PodAddr is the address of the Redis node of rc's pod p: its IP and the port it listens
// on (resources.RedisClientPort).
func PodAddr(rc *redisv1alpha1.RedisCluster, p *corev1.Pod) string {
	return net.JoinHostPort(p.Status.PodIP, strconv.Itoa(int(resources.RedisClientPort(rc, p.Name))))
}

// PodReady reports whether Kubernetes counts the pod Ready.
func PodReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
