package v1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// AppServiceSpec describes a stateless web application: a Deployment of Size pods running
// Image, exposed by a Service on Ports.
// +kubebuilder:validation:XValidation:rule="!has(self.serviceType) || self.serviceType != 'ClusterIP' || !has(self.ports) || self.ports.all(p, !has(p.nodePort) || p.nodePort == 0)",message="spec.ports[].nodePort needs spec.serviceType NodePort (or leave serviceType unset): remove the nodePort or change the serviceType",fieldPath=".ports"
type AppServiceSpec struct {
	// Size is the number of pods.
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Size",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:podCount"}
	Size *int32 `json:"size,omitempty"`

	// Image is the container image the pods run, for example nginx:1.7.9.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:XValidation:rule="self.matches('^(([a-zA-Z0-9]([a-zA-Z0-9-]*[a-zA-Z0-9])?)([.][a-zA-Z0-9]([a-zA-Z0-9-]*[a-zA-Z0-9])?)*(:[0-9]+)?/)?[a-z0-9]+(([._]|__|-+)[a-z0-9]+)*(/[a-z0-9]+(([._]|__|-+)[a-z0-9]+)*)*(:[a-zA-Z0-9_][a-zA-Z0-9_.-]{0,127})?(@[a-z0-9]+([+._-][a-z0-9]+)*:[a-fA-F0-9]{32,})?$')",message="spec.image must be an image reference ([registry[:port]/]lowercase/path[:tag][@digest], no spaces or control characters), for example nginx:1.7.9"
	// +required
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Image",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:text"}
	Image string `json:"image"`

	// ImagePullPolicy is the pods' image pull policy; empty means the Kubernetes default.
	// +kubebuilder:validation:Enum=Always;IfNotPresent;Never
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Image Pull Policy",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:imagePullPolicy"}
	ImagePullPolicy corev1.PullPolicy `json:"imagePullPolicy,omitempty"`

	// Resources are the container's compute requests and limits.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Resources",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:resourceRequirements"}
	Resources corev1.ResourceRequirements `json:"resources,omitempty"`

	// Envs are environment variables of the container.
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:XValidation:rule="self.all(e, size(e.name) > 0)",message="spec.envs[].name must be set: name each variable, for example LOG_LEVEL"
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Environment"
	Envs []corev1.EnvVar `json:"envs,omitempty"`

	// Ports are the Service's ports; the container exposes each targetPort. Any nodePort
	// makes the Service a NodePort Service. targetPort defaults to port. Without ports there
	// is no Service (and a Service the operator made is deleted once no port is left).
	// Port numbers (1-65535) are unique per protocol and names are unique: the API server
	// rejects a duplicate of either. At most 30 ports: the targetPort rule must fit the API
	// server's validation cost budget.
	// +listType=map
	// +listMapKey=port
	// +listMapKey=protocol
	// +kubebuilder:validation:MaxItems=30
	// +kubebuilder:validation:XValidation:rule="self.size() <= 1 || self.all(p, has(p.name) && p.name != '')",message="spec.ports[].name is required when there is more than one port"
	// +kubebuilder:validation:XValidation:rule="self.all(p, !has(p.name) || self.exists_one(q, has(q.name) && q.name == p.name))",message="spec.ports[].name must be unique: give each port its own name"
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Ports"
	Ports []AppServicePort `json:"ports,omitempty"`

	// ServiceType overrides the Service type. Empty means NodePort when any port has a
	// nodePort and ClusterIP otherwise.
	// +kubebuilder:validation:Enum=ClusterIP;NodePort;LoadBalancer
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Service Type"
	ServiceType corev1.ServiceType `json:"serviceType,omitempty"`

	// LivenessProbe restarts a container that stops answering.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Liveness Probe"
	LivenessProbe *corev1.Probe `json:"livenessProbe,omitempty"`

	// ReadinessProbe keeps a pod out of the Service until it answers.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Readiness Probe"
	ReadinessProbe *corev1.Probe `json:"readinessProbe,omitempty"`

	// PodLabels are extra labels on the pods. They cannot override the labels the operator
	// selects pods by.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Pod Labels"
	PodLabels map[string]string `json:"podLabels,omitempty"`

	// PodAnnotations are extra annotations on the pods.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Pod Annotations"
	PodAnnotations map[string]string `json:"podAnnotations,omitempty"`
	// Security holds the pods' and the container's security contexts.
	Security `json:",inline"`
}

// AppServicePort is one port of an AppService's Service: the fields of corev1.ServicePort an
// AppService uses (the same JSON), bounded the way the API server bounds a Service's ports so
// that a mistake is rejected on the AppService rather than later on its Service.
type AppServicePort struct {
	// Name is the port's name, a lowercase DNS label; required when there are several ports.
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')",message="spec.ports[].name must be a lowercase DNS label (a-z, 0-9 and '-', at most 63 characters), for example http"
	// +optional
	Name string `json:"name,omitempty"`

	// Protocol is TCP, UDP or SCTP.
	// +kubebuilder:default=TCP
	// +kubebuilder:validation:Enum=TCP;UDP;SCTP
	// +optional
	Protocol corev1.Protocol `json:"protocol,omitempty"`

	// AppProtocol is the application protocol, for example http or kubernetes.io/h2c.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	AppProtocol *string `json:"appProtocol,omitempty"`

	// Port is the Service's port.
	// +kubebuilder:validation:XValidation:rule="self >= 1 && self <= 65535",message="spec.ports[].port must be between 1 and 65535"
	// +required
	Port int32 `json:"port"`

	// TargetPort is the container's port, a number from 1 to 65535 or the name of a
	// container port; unset means Port.
	// +kubebuilder:validation:XValidation:rule="type(self) == string || (self >= 1 && self <= 65535)",message="spec.ports[].targetPort must be a port number between 1 and 65535 or a container port's name; leave it unset to use port"
	// +optional
	TargetPort intstr.IntOrString `json:"targetPort,omitzero"`

	// NodePort is the port on every node when the Service is a NodePort Service.
	// +kubebuilder:validation:XValidation:rule="self == 0 || (self >= 30000 && self <= 32767)",message="spec.ports[].nodePort must be between 30000 and 32767 (the cluster's node port range)"
	// +optional
	NodePort int32 `json:"nodePort,omitempty"`
}

// ServicePort is the port as the Service has it: Protocol defaults to TCP and TargetPort to
// Port.
func (p AppServicePort) ServicePort() corev1.ServicePort {
	out := corev1.ServicePort{Name: p.Name, Protocol: p.Protocol, AppProtocol: p.AppProtocol,
		Port: p.Port, TargetPort: p.TargetPort, NodePort: p.NodePort}
	if out.Protocol == "" {
		out.Protocol = corev1.ProtocolTCP
	}
	if out.TargetPort.Type == intstr.Int && out.TargetPort.IntVal == 0 {
		out.TargetPort = intstr.FromInt32(p.Port)
	}
	return out
}

// AppServiceStatus is the observed state of an AppService, mirrored from its Deployment.
type AppServiceStatus struct {
	// ObservedGeneration is the generation of the spec this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Replicas is the number of pods the Deployment has.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Replicas",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:podCount"}
	Replicas int32 `json:"replicas,omitempty"`

	// ReadyReplicas is the number of Ready pods.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Ready Replicas"
	ReadyReplicas int32 `json:"readyReplicas,omitempty"`

	// AvailableReplicas is the number of pods Ready for at least minReadySeconds.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Available Replicas"
	AvailableReplicas int32 `json:"availableReplicas,omitempty"`

	// UpdatedReplicas is the number of pods running the current spec.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Updated Replicas"
	UpdatedReplicas int32 `json:"updatedReplicas,omitempty"`

	// Selector is the label selector of the AppService's pods, in the string form of
	// `kubectl get pods -l`; the scale subresource serves it, so a HorizontalPodAutoscaler
	// can find the pods whose metrics it reads.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Pod Selector"
	Selector string `json:"selector,omitempty"`

	// Ready is ReadyReplicas/Size, for `kubectl get`.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Ready"
	Ready string `json:"ready,omitempty"`

	// Conditions are Available, Progressing and Degraded.
	// +listType=map
	// +listMapKey=type
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Conditions",xDescriptors={"urn:alm:descriptor:io.kubernetes.conditions"}
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// AppService is a stateless web application: a Deployment and a Service from one resource.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:subresource:scale:specpath=.spec.size,statuspath=.status.replicas,selectorpath=.status.selector
// +kubebuilder:resource:shortName=appsvc,categories=all;middleware
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.ready`
// +kubebuilder:printcolumn:name="Image",type=string,JSONPath=`.spec.image`
// +kubebuilder:printcolumn:name="Available",type=string,JSONPath=`.status.conditions[?(@.type=="Available")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +operator-sdk:csv:customresourcedefinitions:displayName="App Service",resources={{Deployment,v1},{Service,v1}}
type AppService struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the desired application.
	// +required
	Spec AppServiceSpec `json:"spec"`
	// Status is what the operator observed.
	// +optional
	Status AppServiceStatus `json:"status,omitempty"`
}

// AppServiceList is a list of AppServices.
// +kubebuilder:object:root=true
type AppServiceList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the AppServices.
	Items []AppService `json:"items"`
}

func init() {
	register(&AppService{}, &AppServiceList{})
}
