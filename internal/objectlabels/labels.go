package objectlabels

// AppServiceKind is the app.kubernetes.io/name of an AppService's objects.
const AppServiceKind = "appservice"

// RedisClusterKind is the app.kubernetes.io/name of a RedisCluster's objects.
const RedisClusterKind = "rediscluster"

// Well-known label keys the operator sets on every object it owns.
const (
	LabelName      = "app.kubernetes.io/name"
	LabelInstance  = "app.kubernetes.io/instance"
	LabelManagedBy = "app.kubernetes.io/managed-by"
	LabelComponent = "app.kubernetes.io/component"
	// ManagedBy is the value of LabelManagedBy.
	ManagedBy = "middleware-operator"
)

// SelectorLabels are the labels that select the pods of one instance of a kind. Each
// instance has its own selector, so controllers of different apps never re-sync each other.
func SelectorLabels(kind, instance string) map[string]string {
	return map[string]string{LabelName: kind, LabelInstance: instance}
}

// ObjectLabels are the selector labels plus the managed-by label.
func ObjectLabels(kind, instance string) map[string]string {
	l := SelectorLabels(kind, instance)
	l[LabelManagedBy] = ManagedBy
	return l
}
