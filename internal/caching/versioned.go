package caching

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Versioned reads objects the manager's cache does not hold (a user's Secrets and
// ConfigMaps) through the API reader once per version: while the metadata
// cache Refs reports the resourceVersion of the copy it keeps, Get serves that copy, so a
// converged reconcile sends the API server no request for them. It keeps only the objects
// it was asked for. When Refs does not list an object (not yet seen, or Refs is nil) Get
// asks the API server, and then, when Writer is set, labels the object WatchLabel so that
// Refs holds it from then on.
type Versioned struct {
	Refs client.Reader
	API  client.Reader
	// Writer labels the objects read through API (none when nil).
	Writer client.Writer

	mu   sync.Mutex
	kept map[versionedKey]client.Object
}

type versionedKey struct {
	kind string
	key  client.ObjectKey
}

// refsWait bounds a read of the metadata cache.
const refsWait = 5 * time.Second

// kindOf names the kinds Versioned serves from a metadata cache.
func kindOf(obj client.Object) (string, string) {
	switch obj.(type) {
	case *corev1.Secret:
		return "v1", "Secret"
	case *corev1.ConfigMap:
		return "v1", "ConfigMap"
	}
	return "", ""
}

// Get reads key into obj (see Versioned).
func (v *Versioned) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	apiVersion, kind := kindOf(obj)
	if kind == "" {
		return fmt.Errorf("caching.Versioned does not serve %T", obj)
	}
	vk := versionedKey{kind, key}
	if v.Refs != nil {
		meta := &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: apiVersion, Kind: kind}}
		// The first read of a kind starts its informer and waits for it to sync: bounded, so
		// an informer that cannot list (a grant gone) costs an API read, never a stuck worker.
		refsCtx, cancel := context.WithTimeout(ctx, refsWait)
		err := v.Refs.Get(refsCtx, key, meta)
		cancel()
		if err == nil {
			v.mu.Lock()
			kept := v.kept[vk]
			v.mu.Unlock()
			if kept != nil && kept.GetResourceVersion() == meta.ResourceVersion {
				reflect.ValueOf(obj).Elem().Set(reflect.ValueOf(kept.DeepCopyObject()).Elem())
				return nil
			}
		}
	}
	if err := v.API.Get(ctx, key, obj, opts...); err != nil {
		if apierrors.IsNotFound(err) {
			v.forget(vk)
		}
		return err
	}
	if err := v.label(ctx, kind, obj); err != nil {
		return err
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.kept == nil {
		v.kept = map[versionedKey]client.Object{}
	}
	v.kept[vk] = obj.DeepCopyObject().(client.Object) //nolint:forcetypeassert // a copy of a client.Object
	return nil
}

// label puts WatchLabel on obj, read from the API server, unless it has it or Writer is
// nil; obj becomes the labelled object.
func (v *Versioned) label(ctx context.Context, kind string, obj client.Object) error {
	if v.Writer == nil || obj.GetLabels()[WatchLabel] == WatchLabelValue {
		return nil
	}
	patch := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"`+WatchLabel+`":"`+WatchLabelValue+`"}}}`))
	if err := v.Writer.Patch(ctx, obj, patch); err != nil {
		return fmt.Errorf("while labelling %s %s %s=%s, so that the operator sees its changes (grant the operator patch on %ss, or set the label yourself): %w",
			kind, obj.GetName(), WatchLabel, WatchLabelValue, strings.ToLower(kind), err)
	}
	return nil
}

// Forget drops the copy kept of the object of kind ("Secret" or "ConfigMap") at key, so
// that a deleted object's content (a password) does not outlive it in the process; the next
// Get reads it from the API server again.
func (v *Versioned) Forget(kind string, key client.ObjectKey) { v.forget(versionedKey{kind, key}) }

func (v *Versioned) forget(vk versionedKey) {
	v.mu.Lock()
	defer v.mu.Unlock()
	delete(v.kept, vk)
}
