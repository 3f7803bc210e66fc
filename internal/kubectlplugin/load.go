package kubectlplugin

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appsv1api "github.com/middleware-operator/middleware-operator/api/apps/v1"
	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
	"github.com/middleware-operator/middleware-operator/internal/objectlabels"
	"github.com/middleware-operator/middleware-operator/internal/resources"
)

// ZoneLabel is the well-known label of a node's zone.
const ZoneLabel = "topology.kubernetes.io/zone"

// LoadRedisClusterView reads a RedisCluster, its events, its backups and the nodes' zones.
func LoadRedisClusterView(ctx context.Context, c client.Client, namespace, name string) (RedisClusterView, error) {
	rc := &redisv1alpha1.RedisCluster{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, rc); err != nil {
		return RedisClusterView{}, fmt.Errorf("while reading RedisCluster %s/%s: %w", namespace, name, err)
	}
	backups := &redisv1alpha1.RedisBackupList{}
	if err := c.List(ctx, backups, client.InNamespace(namespace)); err != nil && !apierrors.IsForbidden(err) {
		return RedisClusterView{}, fmt.Errorf("while listing the RedisBackups of %s: %w", namespace, err)
	}
	events, err := EventsOf(ctx, c, namespace, "RedisCluster", name)
	if err != nil {
		return RedisClusterView{}, err
	}
	return RedisClusterView{Cluster: rc, Zones: Zones(ctx, c), LastBackup: LastCompletedBackup(backups.Items, name), Events: events}, nil
}

// LoadAppServiceView reads an AppService, its pods, its events and the nodes' zones.
func LoadAppServiceView(ctx context.Context, c client.Client, namespace, name string) (AppServiceView, error) {
	app := &appsv1api.AppService{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, app); err != nil {
		return AppServiceView{}, fmt.Errorf("while reading AppService %s/%s: %w", namespace, name, err)
	}
	w, err := loadWorkload(ctx, c, namespace, objectlabels.AppServiceKind, "AppService", name)
	return AppServiceView{App: app, Workload: w}, err
}

// LoadCloudManagerView reads a CloudManager, its pods, its events and the nodes' zones.
func LoadCloudManagerView(ctx context.Context, c client.Client, namespace, name string) (CloudManagerView, error) {
	m := &appsv1api.CloudManager{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, m); err != nil {
		return CloudManagerView{}, fmt.Errorf("while reading CloudManager %s/%s: %w", namespace, name, err)
	}
	w, err := loadWorkload(ctx, c, namespace, resources.CloudManagerKind, "CloudManager", name)
	return CloudManagerView{Manager: m, Workload: w}, err
}

// loadWorkload reads the pods (by the selector labels of labelKind), events and zones of
// the object of kind and name.
func loadWorkload(ctx context.Context, c client.Client, namespace, labelKind, kind, name string) (Workload, error) {
	pods := &corev1.PodList{}
	if err := c.List(ctx, pods, client.InNamespace(namespace), client.MatchingLabels(objectlabels.SelectorLabels(labelKind, name))); err != nil {
		return Workload{}, fmt.Errorf("while listing the pods of %s %s: %w", kind, name, err)
	}
	events, err := EventsOf(ctx, c, namespace, kind, name)
	return Workload{Pods: pods.Items, Zones: Zones(ctx, c), Events: events}, err
}

// EventsOf lists the events about the object of kind and name in namespace.
func EventsOf(ctx context.Context, c client.Client, namespace, kind, name string) ([]corev1.Event, error) {
	events := &corev1.EventList{}
	if err := c.List(ctx, events, client.InNamespace(namespace),
		client.MatchingFields{"involvedObject.kind": kind, "involvedObject.name": name}); err != nil {
		return nil, fmt.Errorf("while listing the events of %s %s: %w", kind, name, err)
	}
	return events.Items, nil
}

// Zones reads the zone of every node, by node name; a user who may not list nodes gets an
// empty map (the zone column then shows "-").
func Zones(ctx context.Context, c client.Client) map[string]string {
	nodes := &corev1.NodeList{}
	zones := map[string]string{}
	if err := c.List(ctx, nodes); err != nil {
		return zones
	}
	for _, n := range nodes.Items {
		if z := n.Labels[ZoneLabel]; z != "" {
			zones[n.Name] = z
		}
	}
	return zones
}
