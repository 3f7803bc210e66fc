package kubectlplugin

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/middleware-operator/middleware-operator/internal/objectlabels"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// DefaultLeaseName is the operator's leader election Lease (main.go's --leader-election-id).
const DefaultLeaseName = "middleware-operator.middleware-operator.io"

// customKinds are the operator's kinds; a report holds them whole (redacted).
var customKinds = []schema.GroupVersionKind{
	{Group: "apps.middleware-operator.io", Version: "v1", Kind: "AppService"},
	{Group: "apps.middleware-operator.io", Version: "v1", Kind: "CloudManager"},
	{Group: "redis.middleware-operator.io", Version: "v1alpha1", Kind: "RedisCluster"},
	{Group: "redis.middleware-operator.io", Version: "v1alpha1", Kind: "RedisBackup"},
	{Group: "redis.middleware-operator.io", Version: "v1alpha1", Kind: "RedisBackupSchedule"},
}

// childKinds are the kinds of the objects the operator makes, found by its managed-by label.
var childKinds = []schema.GroupVersionKind{
	{Version: "v1", Kind: "Pod"},
	{Version: "v1", Kind: "Service"},
	{Version: "v1", Kind: "ConfigMap"},
	{Version: "v1", Kind: "Secret"},
	{Version: "v1", Kind: "PersistentVolumeClaim"},
	{Version: "v1", Kind: "ServiceAccount"},
	{Group: "apps", Version: "v1", Kind: "Deployment"},
	{Group: "apps", Version: "v1", Kind: "StatefulSet"},
	{Group: "policy", Version: "v1", Kind: "PodDisruptionBudget"},
	{Group: "networking.k8s.io", Version: "v1", Kind: "NetworkPolicy"},
	{Group: "cert-manager.io", Version: "v1", Kind: "Certificate"},
}

// LogSource returns the last lines of a container's log.
type LogSource func(ctx context.Context, namespace, pod, container string, lines int64) ([]byte, error)

// ReportOptions say what a report holds.
type ReportOptions struct {
	// Namespace is the namespace of the custom resources.
	Namespace string
	// Name, when set, keeps the report to the custom resources of that name, the backups
	// and schedules of a RedisCluster of that name, and their children and events.
	Name string
	// OperatorNamespace is where the operator's Lease is; empty: searched in every
	// namespace.
	OperatorNamespace string
	// LeaseName is the operator's Lease (DefaultLeaseName when empty).
	LeaseName string
	// LogLines is how many lines of the leader's log to keep.
	LogLines int64
	// Logs reads the leader's log.
	Logs LogSource
	// Now stamps the archive's files.
	Now time.Time
}

// archive is a report's files in the order written, path to content.
type archive struct {
	names []string
	files map[string][]byte
	notes []string
}

func (a *archive) add(name string, data []byte) {
	if _, ok := a.files[name]; !ok {
		a.names = append(a.names, name)
	}
	a.files[name] = data
}

func (a *archive) note(format string, args ...any) {
	a.notes = append(a.notes, fmt.Sprintf(format, args...))
}

// WriteReport collects the report and writes it to w as a gzipped tar archive under the
// folder report/. It returns the archive's file names.
func WriteReport(ctx context.Context, c client.Client, opts ReportOptions, w io.Writer) ([]string, error) {
	a := &archive{files: map[string][]byte{}}
	names, err := collectObjects(ctx, c, opts, a)
	if err != nil {
		return nil, err
	}
	collectEvents(ctx, c, opts, names, a)
	collectLeader(ctx, c, opts, a)
	readme := fmt.Sprintf("middleware-operator report of namespace %s%s, %s\n\nEvery Secret's values, a CloudManager's rootPass, "+
		"secret-looking environment variables and configuration lines, and kubectl's last-applied-configuration are "+
		"replaced by \"<redacted N bytes>\".\n\n%s\n", opts.Namespace, map[bool]string{true: ", " + opts.Name, false: ""}[opts.Name != ""],
		opts.Now.UTC().Format(time.RFC3339), strings.Join(a.notes, "\n"))
	a.add("README.txt", []byte(readme))
	return a.names, writeTarGz(w, a, opts.Now)
}

// collectObjects adds the custom resources and their children, redacted; it returns the
// names of the objects added, for the events.
func collectObjects(ctx context.Context, c client.Client, opts ReportOptions, a *archive) (map[string]bool, error) {
	names := map[string]bool{}
	for _, gvk := range customKinds {
		items, err := listKind(ctx, c, gvk, opts.Namespace, nil)
		if err != nil {
			a.note("%s: not listed: %v", gvk.Kind, err)
			continue
		}
		for _, u := range items {
			if opts.Name != "" && u.GetName() != opts.Name && !backsUp(u, opts.Name) {
				continue
			}
			if err := addObject(a, u); err != nil {
				return nil, err
			}
			names[u.GetName()] = true
		}
	}
	selector := client.MatchingLabels{objectlabels.LabelManagedBy: objectlabels.ManagedBy}
	if opts.Name != "" {
		selector[objectlabels.LabelInstance] = opts.Name
	}
	for _, gvk := range childKinds {
		items, err := listKind(ctx, c, gvk, opts.Namespace, selector)
		if err != nil {
			a.note("%s: not listed: %v", gvk.Kind, err)
			continue
		}
		for _, u := range items {
			if err := addObject(a, u); err != nil {
				return nil, err
			}
			names[u.GetName()] = true
		}
	}
	return names, nil
}

// backsUp says whether u is a RedisBackup or RedisBackupSchedule of the cluster named cluster.
func backsUp(u unstructured.Unstructured, cluster string) bool {
	got, _, _ := unstructured.NestedString(u.Object, "spec", "cluster")
	return strings.HasPrefix(u.GetKind(), "RedisBackup") && got == cluster
}

// listKind lists the objects of gvk in namespace; a kind the cluster does not serve is an
// empty list.
func listKind(ctx context.Context, c client.Client, gvk schema.GroupVersionKind, namespace string, selector client.MatchingLabels) ([]unstructured.Unstructured, error) {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	opts := []client.ListOption{client.InNamespace(namespace)}
	if selector != nil {
		opts = append(opts, selector)
	}
	if err := c.List(ctx, list, opts...); err != nil {
		if meta.IsNoMatchError(err) || apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, err
	}
	return list.Items, nil
}

// addObject adds u, redacted, as <namespace>/<kind>/<name>.yaml.
func addObject(a *archive, u unstructured.Unstructured) error {
	if u.GetKind() == "" {
		return fmt.Errorf("an object %s without its kind", u.GetName())
	}
	obj := u.DeepCopy().Object
	Redact(obj)
	data, err := yaml.Marshal(obj)
	if err != nil {
		return fmt.Errorf("while writing %s %s: %w", u.GetKind(), u.GetName(), err)
	}
	a.add(path.Join(u.GetNamespace(), strings.ToLower(u.GetKind()), u.GetName()+".yaml"), data)
	return nil
}

// collectEvents adds the namespace's events about the objects named in names (every event
// of the namespace when the report is not kept to one name), oldest first.
func collectEvents(ctx context.Context, c client.Client, opts ReportOptions, names map[string]bool, a *archive) {
	list := &corev1.EventList{}
	if err := c.List(ctx, list, client.InNamespace(opts.Namespace)); err != nil {
		a.note("events: not listed: %v", err)
		return
	}
	var keep []corev1.Event
	for _, e := range list.Items {
		if opts.Name == "" || names[e.InvolvedObject.Name] {
			keep = append(keep, e)
		}
	}
	keep = LatestEvents(keep, len(keep))
	var b strings.Builder
	for _, e := range keep {
		fmt.Fprintf(&b, "%s  %-7s  %s/%s  %s  %s\n", EventTime(e).UTC().Format(time.RFC3339), e.Type,
			e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Reason, strings.Join(strings.Fields(e.Message), " "))
	}
	a.add(path.Join(opts.Namespace, "events.txt"), []byte(b.String()))
}

// collectLeader adds the operator's Lease and its holder's recent log; what it cannot find
// is noted in the README.
func collectLeader(ctx context.Context, c client.Client, opts ReportOptions, a *archive) {
	lease, err := findLease(ctx, c, opts)
	if err != nil {
		a.note("operator: %v", err)
		return
	}
	data, _ := yaml.Marshal(lease)
	a.add("operator/lease.yaml", data)
	holder := ""
	if lease.Spec.HolderIdentity != nil {
		holder = *lease.Spec.HolderIdentity
	}
	podName := LeaderPod(holder)
	if podName == "" {
		a.note("operator: the Lease %s/%s has no holder", lease.Namespace, lease.Name)
		return
	}
	pod := &corev1.Pod{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: lease.Namespace, Name: podName}, pod); err != nil {
		a.note("operator: the leader %q is not a pod of namespace %s (%v): it runs outside the cluster, so its log is not collected", holder, lease.Namespace, err)
		return
	}
	container := pod.Spec.Containers[0].Name
	for _, ct := range pod.Spec.Containers {
		if ct.Name == "manager" {
			container = ct.Name
		}
	}
	if opts.Logs == nil {
		a.note("operator: no log source")
		return
	}
	log, err := opts.Logs(ctx, pod.Namespace, pod.Name, container, opts.LogLines)
	if err != nil {
		a.note("operator: the log of %s/%s: %v", pod.Namespace, pod.Name, err)
		return
	}
	a.note("operator: the leader is pod %s/%s; operator/%s.log holds its last %d lines", pod.Namespace, pod.Name, pod.Name, opts.LogLines)
	a.add("operator/"+pod.Name+".log", log)
}

// findLease reads the operator's Lease in opts.OperatorNamespace, or finds it by name in
// every namespace.
func findLease(ctx context.Context, c client.Client, opts ReportOptions) (*coordinationv1.Lease, error) {
	name := opts.LeaseName
	if name == "" {
		name = DefaultLeaseName
	}
	if opts.OperatorNamespace != "" {
		lease := &coordinationv1.Lease{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: opts.OperatorNamespace, Name: name}, lease); err != nil {
			return nil, fmt.Errorf("while reading the Lease %s/%s: %w", opts.OperatorNamespace, name, err)
		}
		return lease, nil
	}
	leases := &coordinationv1.LeaseList{}
	if err := c.List(ctx, leases); err != nil {
		return nil, fmt.Errorf("while looking for the Lease %s in every namespace (give --operator-namespace): %w", name, err)
	}
	var found []coordinationv1.Lease
	for _, l := range leases.Items {
		if l.Name == name {
			found = append(found, l)
		}
	}
	switch len(found) {
	case 0:
		return nil, fmt.Errorf("no Lease %s in any namespace: is the operator running with leader election?", name)
	case 1:
		return &found[0], nil
	}
	namespaces := make([]string, len(found))
	for i, l := range found {
		namespaces[i] = l.Namespace
	}
	slices.Sort(namespaces)
	return nil, fmt.Errorf("a Lease %s in each of %s: give --operator-namespace", name, strings.Join(namespaces, ", "))
}

// LeaderPod is the pod name in a Lease's holder identity: controller-runtime writes
// "<hostname>_<uuid>", and a pod's hostname is its name.
func LeaderPod(holder string) string {
	pod, _, _ := strings.Cut(holder, "_")
	return pod
}

// writeTarGz writes the archive's files under report/.
func writeTarGz(w io.Writer, a *archive, now time.Time) error {
	gz := gzip.NewWriter(w)
	tw := tar.NewWriter(gz)
	for _, name := range a.names {
		data := a.files[name]
		if err := tw.WriteHeader(&tar.Header{Name: "report/" + name, Mode: 0o644, Size: int64(len(data)), ModTime: now, Typeflag: tar.TypeReg}); err != nil {
			return err
		}
		if _, err := tw.Write(data); err != nil {
			return err
		}
	}
	return errors.Join(tw.Close(), gz.Close())
}

// ReadReport reads an archive WriteReport wrote: each file's content by its name.
func ReadReport(r io.Reader) (map[string]string, error) {
	gz, err := gzip.NewReader(r)
	if err != nil {
		return nil, err
	}
	tr := tar.NewReader(gz)
	files := map[string]string{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files, nil
		}
		if err != nil {
			return nil, err
		}
		body, err := io.ReadAll(tr)
		if err != nil {
			return nil, err
		}
		files[h.Name] = string(body)
	}
}
