package v1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// AppServiceSpec describes a stateless web application: a Deployment of Size pods running
// Image, exposed by a Service on Ports.
// +kubebuilder:validation:XValidation:rule="!has(self.serviceType) || self.serviceType != 'ClusterIP' || !has(self.ports) || self.ports.all(p, !has(p.nodePort))",message="spec.ports[].nodePort needs spec.serviceType NodePort (or leave serviceType unset): remove the nodePort or change the serviceType",fieldPath=".ports"
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
	// +kubebuilder:validation:XValidation:rule="self.trim() == self && !self.contains(' ')",message="spec.image must be an image reference without spaces, for example nginx:1.7.9"
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
	// Port numbers (1-65535) are unique per protocol (the API server rejects a duplicate);
	// names are unique too (the operator reports a duplicate name as Degraded: a CEL rule
	// comparing names exceeds the cost budget, as ServicePort.name has no maximum length).
	// +listType=map
	// +listMapKey=port
	// +listMapKey=protocol
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:XValidation:rule="self.size() <= 1 || self.all(p, has(p.name) && p.name != '')",message="spec.ports[].name is required when there is more than one port"
	// +kubebuilder:validation:XValidation:rule="self.all(p, !has(p.nodePort) || (p.nodePort >= 30000 && p.nodePort <= 32767))",message="spec.ports[].nodePort must be between 30000 and 32767 (the cluster's node port range)"
	// +kubebuilder:validation:XValidation:rule="self.all(p, p.port >= 1 && p.port <= 65535)",message="spec.ports[].port must be between 1 and 65535"
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Ports"
	Ports []corev1.ServicePort `json:"ports,omitempty"`

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
