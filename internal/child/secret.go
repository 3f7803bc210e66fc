package child

import (
	"context"
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// KeptSecretValue returns the value under key of the Secret named by name when owner controls
// that Secret and the value is not empty, and nil otherwise. A generated credential is made
// once: the caller builds the desired Secret from the kept value and generates a new one only
// when this returns nil, so Ensure never rewrites the Secret with a fresh value. A Secret
// someone else controls yields nil too; Ensure then refuses to touch it.
func KeptSecretValue(ctx context.Context, c client.Reader, owner metav1.Object, name client.ObjectKey, key string) ([]byte, error) {
	kept, err := KeptSecretValues(ctx, c, owner, name, key)
	return kept[key], err
}

// KeptSecretValues is KeptSecretValue for several keys of one Secret, read once: the map
// holds the kept (non-empty) values only.
func KeptSecretValues(ctx context.Context, c client.Reader, owner metav1.Object, name client.ObjectKey, keys ...string) (map[string][]byte, error) {
	secret := &corev1.Secret{}
	if err := c.Get(ctx, name, secret); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("while reading Secret %s: %w", name.Name, err)
	}
	if !metav1.IsControlledBy(secret, owner) {
		return nil, nil
	}
	kept := map[string][]byte{}
	for _, k := range keys {
		if v := secret.Data[k]; len(v) > 0 {
			kept[k] = v
		}
	}
	return kept, nil
}

// MergeSecretKeeping is MergeSecret, except that the live values of keys, when not empty, are
// kept. It guards a generated credential against a stale read: even if the desired Secret
// was built with a fresh value while the live one already had a value, the live one stays.
func MergeSecretKeeping(keys ...string) MergeFunc[*corev1.Secret] {
	return func(live, desired *corev1.Secret) {
		data := make(map[string][]byte, len(desired.Data))
		maps.Copy(data, desired.Data)
		for _, k := range keys {
			if v := live.Data[k]; len(v) > 0 {
				data[k] = v
			}
		}
		live.Data = data
		live.StringData = nil
	}
}
