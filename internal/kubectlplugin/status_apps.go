package kubectlplugin

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	appsv1api "github.com/middleware-operator/middleware-operator/api/apps/v1"
)

// Workload is what the status of an AppService or CloudManager shows besides the object.
type Workload struct {
	// Pods are the object's pods.
	Pods []corev1.Pod
	// Zones are the zones of the Kubernetes nodes, by node name.
	Zones map[string]string
	// Events are the object's events.
	Events []corev1.Event
}

// AppServiceView is what the status of an AppService shows.
type AppServiceView struct {
	// App is the AppService, its status included.
	App *appsv1api.AppService
	Workload
}

// RenderAppService writes the status screen of an AppService as of now.
func RenderAppService(v AppServiceView, p Palette, now time.Time) string {
	a := v.App
	st := a.Status
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s/%s  image %s  size %d  ready %d, available %d, updated %d of %d\n",
		p.Title("AppService"), a.Namespace, a.Name, a.Spec.Image, ptr.Deref(a.Spec.Size, 1),
		st.ReadyReplicas, st.AvailableReplicas, st.UpdatedReplicas, st.Replicas)
	writeGeneration(&b, p, st.ObservedGeneration, a.Generation)
	writeWorkload(&b, p, v.Workload, st.Conditions, now)
	return b.String()
}

// CloudManagerView is what the status of a CloudManager shows.
type CloudManagerView struct {
	// Manager is the CloudManager, its status included.
	Manager *appsv1api.CloudManager
	Workload
}

// RenderCloudManager writes the status screen of a CloudManager as of now.
func RenderCloudManager(v CloudManagerView, p Palette, now time.Time) string {
	m := v.Manager
	st := m.Status
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s/%s  phase %s\n", p.Title("CloudManager"), m.Namespace, m.Name, phaseColour(p, string(st.Phase)))
	writeGeneration(&b, p, st.ObservedGeneration, m.Generation)
	b.WriteString("\n" + p.Title("Tiers") + "\n")
	table(&b, [][]string{
		{"TIER", "OBJECT", "IMAGE", "READY"},
		{"front", "Deployment/" + m.Spec.Front.Deployment.Name, m.Spec.Front.Deployment.Image, orDash(st.Front)},
		{"identity", "Deployment/" + m.Spec.Identity.Deployment.Name, m.Spec.Identity.Deployment.Image, orDash(st.Identity)},
		{"db", "StatefulSet/" + m.Spec.DB.StatefulSet.Name, m.Spec.DB.StatefulSet.Image, orDash(st.DB)},
	})
	writeWorkload(&b, p, v.Workload, st.Conditions, now)
	return b.String()
}

// writeWorkload writes the pods, the conditions (Degraded is bad when True) and the events.
func writeWorkload(b *strings.Builder, p Palette, w Workload, conds []metav1.Condition, now time.Time) {
	b.WriteString("\n")
	writePods(b, p, w.Pods, w.Zones, now)
	b.WriteString("\n")
	writeConditions(b, p, conds, now, appsv1api.ConditionDegraded)
	b.WriteString("\n")
	writeEvents(b, p, w.Events, now)
}

// writeGeneration warns when the status is of an older generation than the spec.
func writeGeneration(b *strings.Builder, p Palette, observed, generation int64) {
	if observed != 0 && observed != generation {
		fmt.Fprintf(b, "%s\n", p.Warn(fmt.Sprintf("The status is of generation %d; the spec is at %d.", observed, generation)))
	}
}

// writePods writes one row per pod, by name: phase, ready containers, restarts, where it
// runs and its age.
func writePods(b *strings.Builder, p Palette, pods []corev1.Pod, zones map[string]string, now time.Time) {
	b.WriteString(p.Title("Pods") + "\n")
	if len(pods) == 0 {
		b.WriteString("  none\n")
		return
	}
	pods = slices.Clone(pods)
	slices.SortFunc(pods, func(x, y corev1.Pod) int { return strings.Compare(x.Name, y.Name) })
	rows := [][]string{{"POD", "PHASE", "READY", "RESTARTS", "KUBE NODE", "ZONE", "AGE"}}
	for _, pod := range pods {
		ready, restarts := 0, int32(0)
		for _, c := range pod.Status.ContainerStatuses {
			if c.Ready {
				ready++
			}
			restarts += c.RestartCount
		}
		readyText := fmt.Sprintf("%d/%d", ready, len(pod.Spec.Containers))
		if ready == len(pod.Spec.Containers) {
			readyText = p.Good(readyText)
		} else {
			readyText = p.Warn(readyText)
		}
		rows = append(rows, []string{pod.Name, phaseColour(p, string(pod.Status.Phase)), readyText, strconv.Itoa(int(restarts)),
			orDash(pod.Spec.NodeName), orDash(zones[pod.Spec.NodeName]), Age(now.Sub(pod.CreationTimestamp.Time))})
	}
	table(b, rows)
}
