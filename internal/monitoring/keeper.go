package monitoring

import (
	"context"
	"slices"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/discovery"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Keeper creates the ServiceMonitor and the PrometheusRule in the operator's namespace once
// the cluster serves both kinds, and puts them back as they were (server-side apply) every
// Interval. Until then it only looks, so the operator installs and runs on clusters without
// the Prometheus Operator. It runs on the leader only.
type Keeper struct {
	// Client writes the objects (its REST mapper must find kinds installed later).
	Client client.Client
	// Discovery tells which kinds the API server serves.
	Discovery discovery.DiscoveryInterface
	// Namespace is the operator's namespace.
	Namespace string
	// Rules is the Prometheus rule file of the PrometheusRule.
	Rules []byte
	// Interval is how often it looks (DefaultInterval when 0).
	Interval time.Duration
	// Log receives what it did, once per change of state.
	Log logr.Logger

	kept bool
}

// DefaultInterval lets the objects appear within a minute of their CRDs.
const DefaultInterval = 30 * time.Second

// fieldOwner is the field manager of the objects.
const fieldOwner = client.FieldOwner("middleware-operator")

// Start looks now and every Interval until ctx ends; errors are logged and tried again.
func (k *Keeper) Start(ctx context.Context) error {
	interval := k.Interval
	if interval <= 0 {
		interval = DefaultInterval
	}
	for {
		if err := k.Sync(ctx); err != nil && ctx.Err() == nil {
			k.Log.Error(err, "while keeping the monitoring objects; trying again", "in", interval)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(interval):
		}
	}
}

// NeedLeaderElection keeps one writer.
func (k *Keeper) NeedLeaderElection() bool { return true }

// Sync applies both objects when the cluster serves their kinds, and does nothing otherwise.
func (k *Keeper) Sync(ctx context.Context) error {
	served, err := k.served()
	if err != nil || !served {
		return err
	}
	rule, err := PrometheusRule(k.Namespace, k.Rules)
	if err != nil {
		return err
	}
	for _, obj := range []*unstructured.Unstructured{ServiceMonitor(k.Namespace), rule} {
		if err := k.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj), fieldOwner, client.ForceOwnership); err != nil {
			return err
		}
	}
	if !k.kept {
		k.Log.Info("the Prometheus Operator API is served: keeping the ServiceMonitor and the PrometheusRule",
			"namespace", k.Namespace, "serviceMonitor", ServiceMonitorName, "prometheusRule", PrometheusRuleName)
		k.kept = true
	}
	return nil
}

// served reports whether the API server serves ServiceMonitors and PrometheusRules.
func (k *Keeper) served() (bool, error) {
	list, err := k.Discovery.ServerResourcesForGroupVersion(GroupVersion.String())
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	var kinds []string
	for _, r := range list.APIResources {
		kinds = append(kinds, r.Kind)
	}
	return slices.Contains(kinds, "ServiceMonitor") && slices.Contains(kinds, "PrometheusRule"), nil
}
