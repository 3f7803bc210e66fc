package v1

// Condition types shared by the kinds of this group.
const (
	// ConditionAvailable means the workload serves with its desired size.
	ConditionAvailable = "Available"
	// ConditionProgressing means a rollout or scale is under way.
	ConditionProgressing = "Progressing"
	// ConditionDegraded means the operator cannot reach the desired state; the reason says why.
	ConditionDegraded = "Degraded"
)
