package child

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"sync"
	"time"

	"github.com/middleware-operator/middleware-operator/internal/objectlabels"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
)

// HashAnnotation records the hash of the desired object the child was last written from, so
// a change of the desired state is seen even where the live object has server defaults.
const HashAnnotation = "middleware-operator.io/desired-hash"

// FieldOwner is the field manager name of every write the operator makes.
const FieldOwner = "middleware-operator"

// Outcome says what Ensure did.
type Outcome string

// The outcomes of Ensure.
const (
	Created   Outcome = "Created"
	Updated   Outcome = "Updated"
	Unchanged Outcome = "Unchanged"
)

// NotControlledError means a same-named object exists that the owner does not control; the
// operator never modifies it.
type NotControlledError struct {
	Kind, Name string
	// Unlabelled is set when the object lacks the label the operator's objects carry.
	Unlabelled bool
}

func (e *NotControlledError) Error() string {
	if e.Unlabelled {
		return fmt.Sprintf("%s %q already exists and is not controlled by this resource (it lacks the label %s=%s): rename or delete it",
			e.Kind, e.Name, objectlabels.LabelManagedBy, objectlabels.ManagedBy)
	}
	return fmt.Sprintf("%s %q already exists and is not controlled by this resource: rename or delete it", e.Kind, e.Name)
}

// StaleCache reports whether err is a write the API server refused because the cache it was
// computed from was behind: a conflict on an update, or AlreadyExists on a create. The retry,
// on fresh objects, decides what to report, so a reconcile returns such an error before
// deriving a status from it (a Degraded written for it would be two status writes for
// nothing).
func StaleCache(err error) bool { return apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) }

// MergeFunc copies the desired state into live, a deep copy of the object on the server,
// keeping what the server allocated (a Service's clusterIP, a node port) and what is
// immutable.
type MergeFunc[PT client.Object] func(live, desired PT)

// Ensure makes the child named by desired match it. desired gets owner as its controller.
// live is the object as it is on the server after Ensure.
func Ensure[T any, PT interface {
	*T
	client.Object
}](ctx context.Context, c client.Client, scheme *runtime.Scheme, owner client.Object, desired PT, mergeFn MergeFunc[PT]) (live PT, outcome Outcome, err error) {
	kind := fmt.Sprintf("%T", desired)
	if gvk, gvkErr := c.GroupVersionKindFor(desired); gvkErr == nil {
		kind = gvk.Kind
	}
	if err := controllerutil.SetControllerReference(owner, desired, scheme); err != nil {
		return nil, "", fmt.Errorf("while setting the owner of %s %s: %w", kind, desired.GetName(), err)
	}
	hash, err := HashOf(desired)
	if err != nil {
		return nil, "", err
	}
	annotations := maps.Clone(desired.GetAnnotations())
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[HashAnnotation] = hash
	desired.SetAnnotations(annotations)

	live = PT(new(T))
	key := client.ObjectKeyFromObject(desired)
	if err := c.Get(ctx, key, live); err != nil {
		if !apierrors.IsNotFound(err) {
			return nil, "", fmt.Errorf("while reading %s %s: %w", kind, desired.GetName(), err)
		}
		if recent.created(kind, key) && awaitCache(ctx, c, key, live) {
			// Created by this process a moment ago, and now in the cache.
			return ensureLive(ctx, c, kind, owner, desired, live, hash, mergeFn)
		}
		err := c.Create(ctx, desired, client.FieldOwner(FieldOwner))
		switch {
		case err == nil:
			recent.add(kind, key)
			return desired, Created, nil
		case !apierrors.IsAlreadyExists(err):
			return nil, "", fmt.Errorf("while creating %s %s: %w", kind, desired.GetName(), err)
		case !awaitCache(ctx, c, key, live):
			// There, and never in the cache, which holds only labelled objects.
			return nil, "", &NotControlledError{Kind: kind, Name: desired.GetName(), Unlabelled: true}
		}
		// The cache was behind: a reconcile a moment ago created it.
	}
	return ensureLive(ctx, c, kind, owner, desired, live, hash, mergeFn)
}

// ensureLive updates live, the child as the cache has it, to desired when they differ.
func ensureLive[PT client.Object](ctx context.Context, c client.Client, kind string, owner client.Object, desired, live PT, hash string,
	mergeFn MergeFunc[PT]) (PT, Outcome, error) {
	var none PT
	if !metav1.IsControlledBy(live, owner) {
		return live, "", &NotControlledError{Kind: kind, Name: desired.GetName()}
	}
	if live.GetAnnotations()[HashAnnotation] == hash {
		if Subset(desired, live) {
			return live, Unchanged, nil
		}
	}
	updated := live.DeepCopyObject().(PT) //nolint:forcetypeassert // DeepCopyObject returns the same type
	mergeFn(updated, desired)
	updated.SetLabels(mergeMaps(live.GetLabels(), desired.GetLabels()))
	updated.SetAnnotations(mergeMaps(live.GetAnnotations(), desired.GetAnnotations()))
	updated.SetOwnerReferences(desired.GetOwnerReferences())
	if err := c.Update(ctx, updated, client.FieldOwner(FieldOwner)); err != nil {
		return none, "", fmt.Errorf("while updating %s %s: %w", kind, desired.GetName(), err)
	}
	return updated, Updated, nil
}

// cacheLag is how long Ensure waits for an object the server has and the cache does not:
// its own creation reaches the cache within milliseconds (measured in tests/bench, where a
// reconcile started by the new Deployment's event missed the Service created just before).
const cacheLag = time.Second

// awaitCache polls the cache for key into live for up to cacheLag; it reports whether the
// object arrived.
// recent remembers the children this process created within cacheLag.
var recent = &recentCreates{at: map[string]time.Time{}}

// recentCreates lets a reconcile that runs before the cache holds a child created a moment
// ago (one started by the event of its sibling) wait for the cache instead of sending a
// Create that can only fail with AlreadyExists.
type recentCreates struct {
	mu     sync.Mutex
	at     map[string]time.Time
	pruned time.Time
}

func (r *recentCreates) add(kind string, key client.ObjectKey) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := time.Now()
	if now.Sub(r.pruned) > cacheLag {
		for k, at := range r.at {
			if now.Sub(at) > cacheLag {
				delete(r.at, k)
			}
		}
		r.pruned = now
	}
	r.at[kind+"/"+key.String()] = now
}

func (r *recentCreates) created(kind string, key client.ObjectKey) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	at, ok := r.at[kind+"/"+key.String()]
	return ok && time.Since(at) <= cacheLag
}

func awaitCache(ctx context.Context, c client.Reader, key client.ObjectKey, live client.Object) bool {
	deadline := time.Now().Add(cacheLag)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		time.Sleep(20 * time.Millisecond)
		if c.Get(ctx, key, live) == nil {
			return true
		}
	}
	return false
}

func mergeMaps(live, desired map[string]string) map[string]string {
	out := maps.Clone(live)
	if out == nil {
		out = map[string]string{}
	}
	maps.Copy(out, desired)
	return out
}

// HashOf is the hash of obj as the server would store it, which Ensure keeps in
// HashAnnotation to tell whether a child changed; a caller keeping a child Ensure cannot
// (an unstructured kind) uses it the same way.
func HashOf(obj client.Object) (string, error) {
	data, err := json.Marshal(obj)
	if err != nil {
		return "", fmt.Errorf("while hashing %s: %w", obj.GetName(), err)
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:8]), nil
}
