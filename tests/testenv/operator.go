package testenv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/middleware-operator/middleware-operator/internal/guard"
)

// The operator's identity as config/default names it (namePrefix middleware-operator-): the
// admission guard of config/guard matches this ServiceAccount name in any namespace.
const (
	OperatorNamespace      = "middleware-operator-system"
	OperatorServiceAccount = "middleware-operator-controller-manager"
)

// GuardFile is the admission guard on the operator's token (config/guard).
const GuardFile = "config/guard/guard.yaml"

// OperatorConfig installs what a cluster-wide install (`make deploy`) grants the operator,
// manager-role and the cluster-scoped review grants bound to its ServiceAccount everywhere,
// and, with guard, the admission guard of config/guard, then returns a client config that
// acts with that ServiceAccount's own token: what the operator can do here is what it could
// do in a cluster. Calling it again returns a config with a fresh token.
func (e *Env) OperatorConfig(ctx context.Context, guard bool) (*rest.Config, error) {
	for _, obj := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: OperatorNamespace}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: OperatorNamespace, Name: OperatorServiceAccount}},
	} {
		if err := e.Client.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("while creating %s %s: %w", obj.GetObjectKind().GroupVersionKind().Kind, obj.GetName(), err)
		}
	}
	files := []string{"config/rbac/role.yaml", ClusterRoleFile}
	if guard {
		files = append(files, GuardFile)
	}
	if err := Apply(ctx, e.Client, files, clusterRoleBinding("manager-role"), clusterRoleBinding("manager-cluster-role")); err != nil {
		return nil, err
	}
	cfg, err := e.TokenConfig(ctx, OperatorNamespace, OperatorServiceAccount)
	if err != nil {
		return nil, err
	}
	if guard {
		return cfg, waitGuard(ctx, cfg, e.Scheme)
	}
	return cfg, nil
}

// waitGuard waits until the API server enforces the guard on the token of cfg: policies
// take effect a moment after they are stored.
func waitGuard(ctx context.Context, cfg *rest.Config, scheme *k8sruntime.Scheme) error {
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return err
	}
	deadline := time.Now().Add(time.Minute)
	for {
		state, err := guard.Check(ctx, c, OperatorNamespace)
		if state == guard.Active {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the admission guard of %s is not enforced after a minute: %s (%w)", GuardFile, state, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TokenConfig is a client config that acts with a fresh token of the ServiceAccount
// namespace/name, with the admin config's client-side rate limits.
func (e *Env) TokenConfig(ctx context.Context, namespace, name string) (*rest.Config, error) {
	cs, err := e.Cluster.Clientset()
	if err != nil {
		return nil, err
	}
	tr, err := cs.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](24 * 3600)}}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("while requesting a token of %s/%s: %w", namespace, name, err)
	}
	cfg := rest.AnonymousClientConfig(e.Cluster.Config)
	cfg.BearerToken = tr.Status.Token
	cfg.QPS, cfg.Burst = e.Cluster.Config.QPS, e.Cluster.Config.Burst
	return cfg, nil
}

// clusterRoleBinding binds a ClusterRole to the operator's ServiceAccount in every
// namespace, as config/rbac/cluster-wide does for manager-role.
func clusterRoleBinding(role string) *unstructured.Unstructured {
	b := &rbacv1.ClusterRoleBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRoleBinding"},
		ObjectMeta: metav1.ObjectMeta{Name: role + "-operator"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: OperatorNamespace, Name: OperatorServiceAccount}},
	}
	m, err := k8sruntime.DefaultUnstructuredConverter.ToUnstructured(b)
	if err != nil {
		panic(err) // a typed object always converts
	}
	return &unstructured.Unstructured{Object: m}
}

// Apply applies, server-side, every object of the repository's YAML files and objs.
func Apply(ctx context.Context, c client.Client, files []string, objs ...*unstructured.Unstructured) error {
	for _, f := range files {
		docs, err := readManifests(filepath.Join(RepoRoot(), f))
		if err != nil {
			return err
		}
		objs = append(objs, docs...)
	}
	for _, u := range objs {
		if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner("testenv"), client.ForceOwnership); err != nil {
			return fmt.Errorf("while applying %s %s: %w", u.GetKind(), u.GetName(), err)
		}
	}
	return nil
}

// readManifests decodes every object of a multi-document YAML file.
func readManifests(path string) ([]*unstructured.Unstructured, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var out []*unstructured.Unstructured
	for {
		u := &unstructured.Unstructured{}
		err := dec.Decode(&u.Object)
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("while reading %s: %w", path, err)
		}
		if len(u.Object) > 0 {
			out = append(out, u)
		}
	}
}
