package localcluster

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// ExpandableStorageClass is the class of StorageClasses whose claims grow here: the default
// class allows volume expansion; local-path does not, so a resize of its claims is refused
// as by a StorageClass without allowVolumeExpansion.
const ExpandableStorageClass = "kwok-volume"

// OfflineResizeStorageClass allows expansion too, but its volumes' filesystems grow only
// when the pod that mounts them starts again, as some CSI drivers' do: a grown claim shows
// the condition FileSystemResizePending until then.
const OfflineResizeStorageClass = "kwok-offline-resize"

// resizeEvery is how often the stand-in resizer looks at the claims.
const resizeEvery = 300 * time.Millisecond

// startResizer runs the stand-in resizer until Stop.
func (c *Cluster) startResizer() error {
	cs, err := c.Clientset()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	c.stopResizer = cancel
	go func() {
		for ctx.Err() == nil {
			resizeClaims(ctx, cs)
			select {
			case <-ctx.Done():
			case <-time.After(resizeEvery):
			}
		}
	}()
	return nil
}

// resizeClaims stands in for a CSI driver's external-resizer and the kubelet's filesystem
// expansion, which the kwok volumes have neither of: every bound claim of a StorageClass
// that allows expansion whose request is above its capacity gets its volume's capacity
// raised, then its own status.capacity and status.allocatedResources at once (an online
// resize), or, for OfflineResizeStorageClass, the condition FileSystemResizePending until a
// pod that mounts it is created after the condition (the kubelet's part at its start).
func resizeClaims(ctx context.Context, cs kubernetes.Interface) {
	claims, err := cs.CoreV1().PersistentVolumeClaims("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return
	}
	expandable := map[string]bool{}
	for i := range claims.Items {
		pvc := &claims.Items[i]
		want, have := pvc.Spec.Resources.Requests.Storage(), pvc.Status.Capacity.Storage()
		class := ptr.Deref(pvc.Spec.StorageClassName, "")
		if pvc.Status.Phase != corev1.ClaimBound || pvc.Spec.VolumeName == "" || class == "" || want.Cmp(*have) <= 0 {
			continue
		}
		ok, seen := expandable[class]
		if !seen {
			sc, err := cs.StorageV1().StorageClasses().Get(ctx, class, metav1.GetOptions{})
			ok = err == nil && ptr.Deref(sc.AllowVolumeExpansion, false)
			expandable[class] = ok
		}
		if !ok {
			continue
		}
		pv, err := cs.CoreV1().PersistentVolumes().Get(ctx, pvc.Spec.VolumeName, metav1.GetOptions{})
		if err != nil {
			continue
		}
		if pv.Spec.Capacity.Storage().Cmp(*want) < 0 {
			pv.Spec.Capacity[corev1.ResourceStorage] = *want
			if _, err := cs.CoreV1().PersistentVolumes().Update(ctx, pv, metav1.UpdateOptions{}); err != nil {
				continue
			}
		}
		if class == OfflineResizeStorageClass && !restartedSinceResize(ctx, cs, pvc) {
			continue
		}
		pvc.Status.Capacity = corev1.ResourceList{corev1.ResourceStorage: *want}
		pvc.Status.AllocatedResources = corev1.ResourceList{corev1.ResourceStorage: *want}
		pvc.Status.Conditions = nil
		_, _ = cs.CoreV1().PersistentVolumeClaims(pvc.Namespace).UpdateStatus(ctx, pvc, metav1.UpdateOptions{})
	}
}

// restartedSinceResize reports whether a running pod mounting pvc was created after its
// FileSystemResizePending condition; until one is, it sets the condition (once).
func restartedSinceResize(ctx context.Context, cs kubernetes.Interface, pvc *corev1.PersistentVolumeClaim) bool {
	var pending *corev1.PersistentVolumeClaimCondition
	for i := range pvc.Status.Conditions {
		if pvc.Status.Conditions[i].Type == corev1.PersistentVolumeClaimFileSystemResizePending {
			pending = &pvc.Status.Conditions[i]
		}
	}
	if pending == nil {
		pvc.Status.AllocatedResources = corev1.ResourceList{corev1.ResourceStorage: *pvc.Spec.Resources.Requests.Storage()}
		pvc.Status.Conditions = append(pvc.Status.Conditions, corev1.PersistentVolumeClaimCondition{
			Type: corev1.PersistentVolumeClaimFileSystemResizePending, Status: corev1.ConditionTrue,
			LastTransitionTime: metav1.Now(), Message: "Waiting for user to (re-)start a pod to finish file system resize of volume on node.",
		})
		_, _ = cs.CoreV1().PersistentVolumeClaims(pvc.Namespace).UpdateStatus(ctx, pvc, metav1.UpdateOptions{})
		return false
	}
	pods, err := cs.CoreV1().Pods(pvc.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return false
	}
	for _, p := range pods.Items {
		for _, v := range p.Spec.Volumes {
			if v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == pvc.Name &&
				p.Status.Phase == corev1.PodRunning && p.CreationTimestamp.After(pending.LastTransitionTime.Time) {
				return true
			}
		}
	}
	return false
}
