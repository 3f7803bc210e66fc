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

// resizeClaims stands in for a CSI driver's external-resizer and the kubelet's online
// filesystem expansion, which the kwok volumes have neither of: every bound claim of a
// StorageClass that allows expansion whose request is above its capacity gets its volume's
// capacity raised, then its own status.capacity and status.allocatedResources, at once (an
// online resize: no FileSystemResizePending, no restart).
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
		pvc.Status.Capacity = corev1.ResourceList{corev1.ResourceStorage: *want}
		pvc.Status.AllocatedResources = corev1.ResourceList{corev1.ResourceStorage: *want}
		pvc.Status.Conditions = nil
		_, _ = cs.CoreV1().PersistentVolumeClaims(pvc.Namespace).UpdateStatus(ctx, pvc, metav1.UpdateOptions{})
	}
}
