package testenv

import (
	"bytes"
	"encoding/json"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/middleware-operator/middleware-operator/tests/localcluster"
)

// FreePorts returns n distinct free loopback TCP ports below the kernel's ephemeral range
// (see localcluster.FreePorts: a port listen(":0") hands out can be taken by an outgoing
// connection before the process it was picked for binds it); it fails t when there are none.
func FreePorts(t testing.TB, n int) []int {
	t.Helper()
	ports, err := localcluster.FreePorts(n)
	if err != nil {
		t.Fatal(err)
	}
	return ports
}

// Update reads the object named key into obj, applies change and writes it back, retrying
// on conflicts; it fails the test on any other error.
func Update[T client.Object](t *testing.T, c client.Client, key client.ObjectKey, obj T, change func(T)) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := c.Get(t.Context(), key, obj); err != nil {
			return err
		}
		change(obj)
		return c.Update(t.Context(), obj)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// Table lists resource (of the API group/version path gv, such as "apps.middleware-operator.io/v1")
// in namespace as the API server's Table, which is what `kubectl get` prints, and returns
// it with its column names.
func (e *Env) Table(t *testing.T, gv, namespace, resource string) (metav1.Table, []string) {
	t.Helper()
	cs, err := e.Cluster.Clientset()
	if err != nil {
		t.Fatal(err)
	}
	raw, err := cs.RESTClient().Get().AbsPath("/apis", gv, "namespaces", namespace, resource).
		SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").DoRaw(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var table metav1.Table
	if err := json.Unmarshal(raw, &table); err != nil {
		t.Fatal(err)
	}
	names := make([]string, len(table.ColumnDefinitions))
	for i, c := range table.ColumnDefinitions {
		names[i] = c.Name
	}
	return table, names
}

// LockedBuffer is an output sink safe for concurrent writers (a process's output, a logger).
type LockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write appends p.
func (b *LockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns everything written so far.
func (b *LockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// PodReady is the pod's Ready condition.
func PodReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
