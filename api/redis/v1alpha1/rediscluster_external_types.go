package v1alpha1

// ExternalAccessType is how each Redis node is exposed outside the Kubernetes cluster.
type ExternalAccessType string

const (
	// ExternalAccessLoadBalancer gives each node a Service of type LoadBalancer: the address
	// the load balancer gets is the one the node announces, with the client port 6379.
	ExternalAccessLoadBalancer ExternalAccessType = "LoadBalancer"
	// ExternalAccessNodePort gives each node a Service of type NodePort on a node port of its
	// own (firstNodePort plus the pod's ordinal), on which the node itself listens, so the
	// port it announces is the one clients outside dial and its replicas dial at its pod
	// address; it announces the address of the Kubernetes node it runs on (the pod's
	// status.hostIP).
	ExternalAccessNodePort ExternalAccessType = "NodePort"
)

// ExternalAccessSpec exposes each Redis node on an address of its own outside the
// Kubernetes cluster network.
// +kubebuilder:validation:XValidation:rule="self.type == 'NodePort' ? has(self.firstNodePort) : !has(self.firstNodePort)",message="spec.externalAccess.firstNodePort goes with type NodePort, and only with it: set it to the first of the node ports the pods take (pod i takes firstNodePort + i, inside the cluster's node port range, 30000-32767 by default), or remove it with type LoadBalancer",fieldPath=".firstNodePort"
type ExternalAccessSpec struct {
	// Type is the kind of Service each node gets: LoadBalancer (the node announces the load
	// balancer's address, port 6379) or NodePort (the node listens on, and announces, the
	// node port firstNodePort + its ordinal, at its Kubernetes node's address).
	// +kubebuilder:validation:Enum=NodePort;LoadBalancer
	// +required
	Type ExternalAccessType `json:"type"`

	// FirstNodePort is, with type NodePort, the node port of the first pod; pod i gets
	// FirstNodePort + i, for its Service and as the port its Redis node listens on (the
	// cluster bus on that port + 10000). The ports must be inside the Kubernetes cluster's
	// node port range (30000-32767 by default) and free, and at least 10000 (the pods run
	// without the right to bind ports below 1024, and the exporter has 9121). It cannot
	// change, and NodePort cannot be turned on or off, on an existing cluster.
	// +kubebuilder:validation:Minimum=10000
	// +kubebuilder:validation:Maximum=55535
	// +optional
	FirstNodePort *int32 `json:"firstNodePort,omitempty"`

	// Annotations are put on each node's Service, for the cloud's load balancer controller
	// (an internal load balancer, a subnet, a health check).
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`
}
