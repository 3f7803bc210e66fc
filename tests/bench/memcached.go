package bench

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// MemcachedFigures are the memcached sample's pattern (tests/bench/memcached) run as a
// process on a fresh local cluster of its own: N Memcached of size 1.
type MemcachedFigures struct {
	// Seconds until every Deployment exists, and until every one is Available.
	Children  float64 `json:"childrenSeconds"`
	Available float64 `json:"availableSeconds"`
	// API writes until every Deployment was Available (and 2 s more), and over the steady
	// window that follows.
	CreateWrites int64   `json:"createWrites"`
	SteadyWrites int64   `json:"steadyWrites"`
	SteadyCPU    float64 `json:"steadyCPUSecondsPerMinute"`
	// Resident set (current and peak) after the steady window, and after the unrelated
	// objects were added.
	RSSBytes              uint64 `json:"rssBytes"`
	PeakRSSBytes          uint64 `json:"peakRSSBytes"`
	RSSFileBytes          uint64 `json:"rssFileBytes"`
	RSSUnrelatedBytes     uint64 `json:"rssWithUnrelatedBytes"`
	PeakRSSUnrelatedBytes uint64 `json:"peakRSSWithUnrelatedBytes"`
}

// memcachedCRD is the sample's CustomResourceDefinition: spec.size, status with conditions.
func memcachedCRD() *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": "memcacheds.cache.example.com"},
		"spec": map[string]any{
			"group": "cache.example.com", "scope": "Namespaced",
			"names": map[string]any{"kind": "Memcached", "listKind": "MemcachedList", "plural": "memcacheds", "singular": "memcached"},
			"versions": []any{map[string]any{
				"name": "v1alpha1", "served": true, "storage": true,
				"subresources": map[string]any{"status": map[string]any{}},
				"schema": map[string]any{"openAPIV3Schema": map[string]any{
					"type": "object",
					"properties": map[string]any{
						"spec": map[string]any{"type": "object", "properties": map[string]any{
							"size": map[string]any{"type": "integer", "format": "int32", "minimum": int64(0)}}},
						"status": map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true},
					},
				}},
			}},
		},
	}}
}

// memcached is the i-th Memcached of a run.
func memcached(ns string, i int) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "cache.example.com/v1alpha1", "kind": "Memcached",
		"metadata": map[string]any{"name": fmt.Sprintf("memcached-%05d", i), "namespace": ns},
		"spec":     map[string]any{"size": int64(1)},
	}}
}

// runMemcached measures the memcached sample's pattern for o.N on a fresh local cluster.
func runMemcached(ctx context.Context, o Options, f *MemcachedFigures) error {
	const ns = "memcached"
	env, c, _, err := freshCluster(ctx, o.N, ns)
	if err != nil {
		return err
	}
	defer env.Stop()
	watched, stopWatching, err := watching(ctx, env, ns)
	if err != nil {
		return err
	}
	defer stopWatching()
	if err := c.Create(ctx, memcachedCRD()); err != nil {
		return err
	}
	if _, err := waitFor(ctx, time.Now(), "the Memcached CRD served", func(ctx context.Context) (bool, error) {
		return c.List(ctx, &unstructured.UnstructuredList{Object: map[string]any{"apiVersion": "cache.example.com/v1alpha1", "kind": "MemcachedList"}},
			client.InNamespace(ns)) == nil, nil
	}); err != nil {
		return err
	}
	bin, err := binary("./tests/bench/memcached")
	if err != nil {
		return err
	}
	proc, err := startProcess(bin, env.Cluster.Kubeconfig, filepath.Join(env.Cluster.Dir, "memcached.log"), "--metrics-bind-address", "--metrics-secure=false")
	if err != nil {
		return err
	}
	defer proc.stop()
	if _, err := proc.waitSettled(ctx, "memcached", 0); err != nil {
		return err
	}

	start := time.Now()
	if err := parallel(ctx, o.N, func(ctx context.Context, i int) error { return c.Create(ctx, memcached(ns, i)) }); err != nil {
		return err
	}
	const image = "memcached:1.6.26-alpine3.19"
	if f.Children, err = waitFor(ctx, start, "memcached Deployments", deploymentsDone(watched, ns, o.N, image, false)); err != nil {
		return err
	}
	if f.Available, err = waitFor(ctx, start, "memcached Deployments Available", deploymentsDone(watched, ns, o.N, image, true)); err != nil {
		return err
	}
	time.Sleep(2 * time.Second)
	families, err := proc.scrape(ctx)
	if err != nil {
		return err
	}
	f.CreateWrites = apiWrites(families)
	o.Logf("memcached: %d Deployments exist after %.1f s, Available after %.1f s, %d writes", o.N, f.Children, f.Available, f.CreateWrites)

	cpu0, err := proc.cpuSeconds()
	if err != nil {
		return err
	}
	time.Sleep(o.Steady)
	cpu1, err := proc.cpuSeconds()
	if err != nil {
		return err
	}
	f.SteadyCPU = (cpu1 - cpu0) / o.Steady.Minutes()
	if families, err = proc.scrape(ctx); err != nil {
		return err
	}
	f.SteadyWrites = apiWrites(families) - f.CreateWrites
	if f.RSSBytes, f.PeakRSSBytes, f.RSSFileBytes, err = proc.memory(); err != nil {
		return err
	}
	heap, sys := goMemory(families)
	o.Logf("memcached: steady for %s: %d writes, %.2f CPU s/min; RSS %d MiB (%d MiB file-backed), peak %d MiB; Go heap in use %d MiB, Go runtime %d MiB",
		o.Steady, f.SteadyWrites, f.SteadyCPU, f.RSSBytes>>20, f.RSSFileBytes>>20, f.PeakRSSBytes>>20, heap>>20, sys>>20)

	if err := unrelated(ctx, c, o.Unrelated); err != nil {
		return err
	}
	time.Sleep(10 * time.Second)
	if f.RSSUnrelatedBytes, f.PeakRSSUnrelatedBytes, _, err = proc.memory(); err != nil {
		return err
	}
	o.Logf("memcached: RSS %d MiB (peak %d MiB) after the unrelated objects", f.RSSUnrelatedBytes>>20, f.PeakRSSUnrelatedBytes>>20)
	return nil
}
