package localcluster

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
)

// Zones are the topology zones the nodes are spread over, round robin.
var Zones = []string{"zone-a", "zone-b", "zone-c"}

// StorageClasses are the classes whose PVCs kwok binds to a fake PV; the first is the default.
// local-path is there so manifests written for k3s/kind-style clusters work unchanged.
var StorageClasses = []string{"kwok-volume", "local-path", OfflineResizeStorageClass}

const kwokManagedAnnotation = "kwok.x-k8s.io/node"

func (c *Cluster) startKwok(bin string, port int) error {
	stages, err := c.writeStages(filepath.Join(bin, "kwok-stages"))
	if err != nil {
		return err
	}
	if c.podRange == "" {
		c.podRange, c.rangeLock = takePodRange()
	}
	p, err := c.start("kwok", filepath.Join(bin, "kwok"), []string{
		"--kubeconfig=" + c.Kubeconfig,
		"--config=" + stages,
		"--manage-all-nodes=false",
		"--manage-nodes-with-annotation-selector=" + kwokManagedAnnotation + "=fake",
		"--disregard-status-with-annotation-selector=kwok.x-k8s.io/status=custom",
		"--cidr=" + c.podRange,
		"--node-ip=127.0.0.1",
		"--node-lease-duration-seconds=40",
		"--server-address=127.0.0.1:" + strconv.Itoa(port),
	})
	if err != nil {
		return err
	}
	// kwok's kubelet-like server (logs, exec) is part of being ready.
	return p.waitFor(30*time.Second, func() error {
		conn, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(port), time.Second)
		if err == nil {
			_ = conn.Close()
		}
		return err
	})
}

// writeStages joins kwok's stage files into one config. The PVC stage is widened from the
// kwok-volume class to every class in StorageClasses.
func (c *Cluster) writeStages(dir string) (string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return "", fmt.Errorf("while reading kwok stages (run `make tools`): %w", err)
	}
	classes := "['" + strings.Join(StorageClasses, "','") + "']"
	var docs []string
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return "", err
		}
		doc := strings.ReplaceAll(string(data), "self.spec.storageClassName == 'kwok-volume'",
			"self.spec.storageClassName in "+classes)
		docs = append(docs, doc)
	}
	path := filepath.Join(c.Dir, "kwok-stages.yaml")
	return path, os.WriteFile(path, []byte(strings.Join(docs, "\n---\n")), 0o600)
}

func (c *Cluster) createNodes(ctx context.Context, opts Options) error {
	for i := range opts.Nodes {
		name := fmt.Sprintf("kwok-node-%d", i)
		if err := c.AddNode(ctx, name, Zones[i%len(Zones)], opts.PodsPerNode, nil); err != nil {
			return err
		}
		c.Nodes = append(c.Nodes, name)
	}
	return nil
}

// AddNode registers one more fake node, managed by kwok, in zone with room for pods pods
// and the extra labels; a test uses it for nodes of its own (to cordon them, say).
func (c *Cluster) AddNode(ctx context.Context, name, zone string, pods int, labels map[string]string) error {
	cs, err := c.Clientset()
	if err != nil {
		return err
	}
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("64"),
		corev1.ResourceMemory: resource.MustParse("256Gi"),
		corev1.ResourcePods:   resource.MustParse(strconv.Itoa(pods)),
	}
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Annotations: map[string]string{kwokManagedAnnotation: "fake", "node.alpha.kubernetes.io/ttl": "0"},
			Labels: map[string]string{
				"type":                          "kwok",
				"kubernetes.io/os":              "linux",
				"kubernetes.io/arch":            "amd64",
				"kubernetes.io/hostname":        name,
				"topology.kubernetes.io/zone":   zone,
				"topology.kubernetes.io/region": "local",
			},
		},
		Status: corev1.NodeStatus{Capacity: capacity, Allocatable: capacity},
	}
	for k, v := range labels {
		node.Labels[k] = v
	}
	if _, err := cs.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("while creating node %s: %w", name, err)
	}
	return nil
}

func (c *Cluster) createStorageClasses(ctx context.Context) error {
	cs, err := c.Clientset()
	if err != nil {
		return err
	}
	bind := storagev1.VolumeBindingImmediate
	reclaim := corev1.PersistentVolumeReclaimDelete
	for i, name := range StorageClasses {
		sc := &storagev1.StorageClass{
			ObjectMeta:        metav1.ObjectMeta{Name: name},
			Provisioner:       "kwok.x-k8s.io/volume",
			ReclaimPolicy:     &reclaim,
			VolumeBindingMode: &bind,
		}
		if i == 0 {
			sc.Annotations = map[string]string{"storageclass.kubernetes.io/is-default-class": "true"}
		}
		if name == ExpandableStorageClass || name == OfflineResizeStorageClass {
			sc.AllowVolumeExpansion = ptr.To(true)
		}
		if _, err := cs.StorageV1().StorageClasses().Create(ctx, sc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("while creating StorageClass %s: %w", name, err)
		}
	}
	return nil
}

func (c *Cluster) waitNodesReady(ctx context.Context, timeout time.Duration) error {
	cs, err := c.Clientset()
	if err != nil {
		return err
	}
	return wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		for _, p := range c.procs {
			if p.exited() {
				return false, fmt.Errorf("%s exited: %w\n%s", p.name, p.exitError(), p.logTail(20))
			}
		}
		nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil //nolint:nilerr // retried until the timeout
		}
		ready := 0
		for _, n := range nodes.Items {
			for _, cond := range n.Status.Conditions {
				if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
					ready++
				}
			}
		}
		return ready >= len(c.Nodes), nil
	})
}

// WaitForDefaultServiceAccount waits until the namespace's "default" ServiceAccount exists;
// the ServiceAccount admission plugin rejects pods until then.
func (c *Cluster) WaitForDefaultServiceAccount(ctx context.Context, namespace string) error {
	cs, err := c.Clientset()
	if err != nil {
		return err
	}
	return wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := cs.CoreV1().ServiceAccounts(namespace).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	})
}
