package redis

import (
	"net"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/middleware-operator/middleware-operator/internal/resources"
)

// sortByOrdinal orders pods by their StatefulSet ordinal.
func sortByOrdinal(pods []corev1.Pod) {
	sort.Slice(pods, func(i, j int) bool { return ordinal(pods[i].Name) < ordinal(pods[j].Name) })
}

func ordinal(pod string) int {
	n, _ := strconv.Atoi(pod[strings.LastIndex(pod, "-")+1:])
	return n
}

func podAddr(p *corev1.Pod) string {
	return net.JoinHostPort(p.Status.PodIP, strconv.Itoa(resources.RedisPort))
}

// podReady reports whether Kubernetes counts the pod Ready.
func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
