package v1alpha1

// ExternalAccessType is how each Redis node is exposed outside the Kubernetes cluster.
type ExternalAccessType string

const (
	// ExternalAccessLoadBalancer gives each node a Service of type LoadBalancer: the address
	// the load balancer gets is the one the node announces, with the client port 6379.
	ExternalAccessLoadBalancer ExternalAccessType = "LoadBalancer"
	// ExternalAccessNodePort would give each node a Service of type NodePort. It is refused
	// for now: Redis announces a single client port, which the node's replicas dial too, so
	// a node port (30000-32767) cannot be announced without breaking replication.
	ExternalAccessNodePort ExternalAccessType = "NodePort"
)

// ExternalAccessSpec exposes each Redis node on an address of its own outside the
// Kubernetes cluster network.
// +kubebuilder:validation:XValidation:rule="self.type == 'LoadBalancer'",message="spec.externalAccess.type NodePort is not supported yet: Redis announces one client port, which replicas also dial, so a node port cannot be announced without breaking replication; set spec.externalAccess.type to LoadBalancer",fieldPath=".type"
type ExternalAccessSpec struct {
	// Type is the kind of Service each node gets: LoadBalancer (NodePort is refused for now,
	// see ExternalAccessNodePort).
	// +kubebuilder:validation:Enum=NodePort;LoadBalancer
	// +required
	Type ExternalAccessType `json:"type"`

	// Annotations are put on each node's Service, for the cloud's load balancer controller
	// (an internal load balancer, a subnet, a health check).
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`
}
