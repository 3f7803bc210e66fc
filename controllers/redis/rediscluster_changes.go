package redis

import (
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
)

// ensureEvery is how often a RedisCluster's children are ensured even when no event says
// anything they are built from changed: no event handler watches the NetworkPolicy (see
// NetworkPolicyCacheVerbs), so a hand edit of it is put back within this, and a missed
// event costs no more than this.
const ensureEvery = time.Minute

// childChanges remembers, for each RedisCluster, whether anything its children are built
// from may have changed since they were last ensured: the cluster itself (its
// resourceVersion), an object it owns, one of its pods, or a Secret or ConfigMap it names.
// A converged cluster's periodic look then skips the nine child reads and comparisons
// (the NetworkPolicy's among them, a GET from the API server before it came from the cache), which were half of what an idle
// cluster cost the operator.
type childChanges struct {
	mu    sync.Mutex
	dirty map[types.NamespacedName]bool
	last  map[types.NamespacedName]ensured
}

// ensured is when a cluster's children were last ensured, and at which version of it.
type ensured struct {
	resourceVersion string
	at              time.Time
}

// touch marks a cluster's children as possibly out of date.
func (c *childChanges) touch(key types.NamespacedName) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dirty == nil {
		c.dirty = map[types.NamespacedName]bool{}
	}
	c.dirty[key] = true
}

// pending reports whether an event marked the cluster since its children were last
// ensured, without taking the mark.
func (c *childChanges) pending(key types.NamespacedName) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.dirty[key]
}

// due reports whether rc's children must be ensured now, and takes the mark: an event
// that comes while they are being ensured marks them again for the next reconcile.
func (c *childChanges) due(rc *redisv1alpha1.RedisCluster, now time.Time) bool {
	key := client.ObjectKeyFromObject(rc)
	c.mu.Lock()
	defer c.mu.Unlock()
	dirty := c.dirty[key]
	delete(c.dirty, key)
	last, ok := c.last[key]
	return dirty || !ok || last.resourceVersion != rc.ResourceVersion || now.Sub(last.at) >= ensureEvery
}

// done records that rc's children were ensured without error at now; failed marks them for
// the next reconcile instead.
func (c *childChanges) done(rc *redisv1alpha1.RedisCluster, now time.Time, failed bool) {
	key := client.ObjectKeyFromObject(rc)
	if failed {
		c.touch(key)
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.last == nil {
		c.last = map[types.NamespacedName]ensured{}
	}
	c.last[key] = ensured{resourceVersion: rc.ResourceVersion, at: now}
}

// forget drops a deleted cluster.
func (c *childChanges) forget(key types.NamespacedName) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.dirty, key)
	delete(c.last, key)
}

// ownerChanged is a predicate for the objects a RedisCluster owns: every event marks the
// owner, and passes.
func (c *childChanges) ownerChanged() predicate.Predicate {
	return predicate.NewPredicateFuncs(func(obj client.Object) bool {
		if ref := metav1.GetControllerOf(obj); ref != nil && ref.Kind == "RedisCluster" && ref.APIVersion == redisv1alpha1.GroupVersion.String() {
			c.touch(types.NamespacedName{Namespace: obj.GetNamespace(), Name: ref.Name})
		}
		return true
	})
}
