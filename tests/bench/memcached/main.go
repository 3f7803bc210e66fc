// Command memcached is the bench's stand-in for Operator SDK's memcached sample operator:
// the pattern its tutorial teaches, written here from that description for comparison (it
// is not the sample's code). A Memcached (cache.example.com/v1alpha1, spec.size) gets a
// Deployment of that many replicas. As in the tutorial, the manager's cache is the default
// one (every Deployment of the cluster, whole objects), one reconcile runs at a time, a
// finalizer is added, the status is written with Update after each reconcile, and a new
// Deployment's reconcile is requeued after a minute; the metrics endpoint is the scaffold's
// (HTTPS with authentication and authorization, off with --metrics-secure=false). tests/bench
// runs it as a process.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"slices"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

var groupVersion = schema.GroupVersion{Group: "cache.example.com", Version: "v1alpha1"}

const finalizer = "cache.example.com/finalizer"

// Memcached is the sample's custom resource.
type Memcached struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              MemcachedSpec   `json:"spec,omitempty"`
	Status            MemcachedStatus `json:"status,omitempty"`
}

// MemcachedSpec is the number of memcached pods.
type MemcachedSpec struct {
	Size int32 `json:"size"`
}

// MemcachedStatus holds the Available condition.
type MemcachedStatus struct {
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// DeepCopyObject copies the Memcached.
func (m *Memcached) DeepCopyObject() runtime.Object {
	c := *m
	m.DeepCopyInto(&c.ObjectMeta)
	c.Status.Conditions = slices.Clone(m.Status.Conditions)
	return &c
}

// MemcachedList is a list of Memcached.
type MemcachedList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Memcached `json:"items"`
}

// DeepCopyObject copies the list.
func (l *MemcachedList) DeepCopyObject() runtime.Object {
	c := *l
	l.DeepCopyInto(&c.ListMeta)
	c.Items = make([]Memcached, len(l.Items))
	for i := range l.Items {
		c.Items[i] = *l.Items[i].DeepCopyObject().(*Memcached) //nolint:forcetypeassert // a Memcached's copy
	}
	return &c
}

type reconciler struct {
	client.Client
	scheme *runtime.Scheme
}

func (r *reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	m := &Memcached{}
	if err := r.Get(ctx, req.NamespacedName, m); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if len(m.Status.Conditions) == 0 {
		meta.SetStatusCondition(&m.Status.Conditions, metav1.Condition{Type: "Available", Status: metav1.ConditionUnknown, Reason: "Reconciling", Message: "Starting reconciliation"})
		if err := r.Status().Update(ctx, m); err != nil {
			return ctrl.Result{}, err
		}
		if err := r.Get(ctx, req.NamespacedName, m); err != nil {
			return ctrl.Result{}, err
		}
	}
	if !controllerutil.ContainsFinalizer(m, finalizer) {
		controllerutil.AddFinalizer(m, finalizer)
		if err := r.Update(ctx, m); err != nil {
			return ctrl.Result{}, err
		}
	}
	if !m.DeletionTimestamp.IsZero() {
		controllerutil.RemoveFinalizer(m, finalizer)
		return ctrl.Result{}, r.Update(ctx, m)
	}
	found := &appsv1.Deployment{}
	err := r.Get(ctx, req.NamespacedName, found)
	if apierrors.IsNotFound(err) {
		dep, err := r.deployment(m)
		if err != nil {
			return ctrl.Result{}, err
		}
		if err := r.Create(ctx, dep); err != nil {
			return ctrl.Result{}, err
		}
		return ctrl.Result{RequeueAfter: time.Minute}, nil
	} else if err != nil {
		return ctrl.Result{}, err
	}
	if ptr.Deref(found.Spec.Replicas, 1) != m.Spec.Size {
		found.Spec.Replicas = ptr.To(m.Spec.Size)
		if err := r.Update(ctx, found); err != nil {
			return ctrl.Result{}, err
		}
		return ctrl.Result{RequeueAfter: time.Millisecond}, nil
	}
	meta.SetStatusCondition(&m.Status.Conditions, metav1.Condition{Type: "Available", Status: metav1.ConditionTrue, Reason: "Reconciling",
		Message: fmt.Sprintf("Deployment for custom resource (%s) with %d replicas created successfully", m.Name, m.Spec.Size)})
	return ctrl.Result{}, r.Status().Update(ctx, m)
}

func (r *reconciler) deployment(m *Memcached) (*appsv1.Deployment, error) {
	labels := map[string]string{"app.kubernetes.io/name": "memcached", "app.kubernetes.io/instance": m.Name}
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: m.Name, Namespace: m.Namespace},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(m.Spec.Size),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
					Containers: []corev1.Container{{
						Name: "memcached", Image: "memcached:1.6.26-alpine3.19", ImagePullPolicy: corev1.PullIfNotPresent,
						Command: []string{"memcached", "--memory-limit=64", "-o", "modern", "-v"},
						Ports:   []corev1.ContainerPort{{ContainerPort: 11211, Name: "memcached"}},
						SecurityContext: &corev1.SecurityContext{
							RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](1001), AllowPrivilegeEscalation: ptr.To(false),
							Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
						},
					}},
				},
			},
		},
	}
	return dep, ctrl.SetControllerReference(m, dep, r.scheme)
}

func main() {
	ctrl.SetLogger(zap.New())
	metricsAddr := flag.String("metrics-bind-address", ":8443", "address of the metrics endpoint")
	secure := flag.Bool("metrics-secure", true, "serve metrics over HTTPS to callers allowed to GET /metrics")
	flag.Parse()
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		panic(err)
	}
	scheme.AddKnownTypes(groupVersion, &Memcached{}, &MemcachedList{})
	metav1.AddToGroupVersion(scheme, groupVersion)
	// As today's scaffold serves them: authenticated and authorized unless turned off.
	metrics := metricsserver.Options{BindAddress: *metricsAddr, SecureServing: *secure}
	if *secure {
		metrics.FilterProvider = filters.WithAuthenticationAndAuthorization
	}
	mgr, err := ctrl.NewManager(ctrl.GetConfigOrDie(), ctrl.Options{Scheme: scheme, HealthProbeBindAddress: "0", Metrics: metrics})
	if err == nil {
		err = ctrl.NewControllerManagedBy(mgr).For(&Memcached{}).Owns(&appsv1.Deployment{}).Named("memcached").
			Complete(&reconciler{Client: mgr.GetClient(), scheme: scheme})
	}
	if err == nil {
		err = mgr.Start(ctrl.SetupSignalHandler())
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
