package resources

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	appsv1api "github.com/middleware-operator/middleware-operator/api/apps/v1"
	"github.com/middleware-operator/middleware-operator/internal/objectlabels"
)

// CloudManagerKind is the app.kubernetes.io/name of a CloudManager's objects.
const CloudManagerKind = "cloudmanager"

// The app.kubernetes.io/component of each CloudManager tier; each is also the name of the
// tier's container.
const (
	ComponentFront    = "front"
	ComponentIdentity = "identity"
	ComponentDB       = "db"
)

// Keys of the root password Secret a CloudManager owns.
const (
	SecretUsernameKey = "username"
	SecretPasswordKey = "password"
)

// MariaDB settings of the database tier.
const (
	// MariaDBPort is the port the server listens on and the headless Service exposes.
	MariaDBPort = 3306
	// MariaDBDataVolume is the name of the volumeClaimTemplate; each pod's claim is
	// <MariaDBDataVolume>-<statefulset>-<ordinal>.
	MariaDBDataVolume = "data"
	// MariaDBDataDir is where the data volume is mounted.
	MariaDBDataDir = "/var/lib/mysql"
	// MariaDBRootPasswordEnv is the variable the MariaDB image reads the root password from.
	MariaDBRootPasswordEnv = "MARIADB_ROOT_PASSWORD"
)

// TierReplicas is a tier's desired number of pods (1 when unset).
func TierReplicas(replicas *int32) int32 { return ptr.Deref(replicas, 1) }

// CloudManagerSelector are the labels that select the pods of one tier of a CloudManager.
func CloudManagerSelector(cm *appsv1api.CloudManager, component string) map[string]string {
	l := objectlabels.SelectorLabels(CloudManagerKind, cm.Name)
	l[objectlabels.LabelComponent] = component
	return l
}

// CloudManagerLabels are the labels of every object of one tier of a CloudManager.
func CloudManagerLabels(cm *appsv1api.CloudManager, component string) map[string]string {
	l := objectlabels.ObjectLabels(CloudManagerKind, cm.Name)
	l[objectlabels.LabelComponent] = component
	return l
}

// CloudManagerFrontDeployment is the front tier's Deployment.
func CloudManagerFrontDeployment(cm *appsv1api.CloudManager) *appsv1.Deployment {
	return tierDeployment(cm, ComponentFront, &cm.Spec.Front.Deployment)
}

// CloudManagerIdentityDeployment is the identity tier's Deployment.
func CloudManagerIdentityDeployment(cm *appsv1api.CloudManager) *appsv1.Deployment {
	return tierDeployment(cm, ComponentIdentity, &cm.Spec.Identity.Deployment)
}

func tierDeployment(cm *appsv1api.CloudManager, component string, t *appsv1api.TierDeployment) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: t.Name, Namespace: cm.Namespace, Labels: CloudManagerLabels(cm, component)},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(TierReplicas(t.Replicas)),
			Selector: &metav1.LabelSelector{MatchLabels: CloudManagerSelector(cm, component)},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: CloudManagerLabels(cm, component)},
				Spec: corev1.PodSpec{
					SecurityContext: PodSecurityContext(t.Security),
					Containers: []corev1.Container{{
						Name:            component,
						Image:           t.Image,
						Command:         t.Command,
						Args:            t.Args,
						SecurityContext: ContainerSecurityContext(t.Security),
					}},
				},
			},
		},
	}
}

// CloudManagerSecretName is the name of the root password Secret a CloudManager owns when
// spec.db.rootPasswordSecretRef is unset.
func CloudManagerSecretName(cm *appsv1api.CloudManager) string { return cm.Name + "-db-auth" }

// CloudManagerPasswordSource is the Secret and key the database reads its root password
// from: spec.db.rootPasswordSecretRef, else the Secret the CloudManager owns.
func CloudManagerPasswordSource(cm *appsv1api.CloudManager) (name, key string) {
	if ref := cm.Spec.DB.RootPasswordSecretRef; ref != nil {
		key = ref.Key
		if key == "" {
			key = SecretPasswordKey
		}
		return ref.Name, key
	}
	return CloudManagerSecretName(cm), SecretPasswordKey
}

// CloudManagerSecret is the root password Secret a CloudManager owns, holding password.
func CloudManagerSecret(cm *appsv1api.CloudManager, password []byte) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name: CloudManagerSecretName(cm), Namespace: cm.Namespace, Labels: CloudManagerLabels(cm, ComponentDB),
		},
		Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{SecretUsernameKey: []byte("root"), SecretPasswordKey: password},
	}
}

// CloudManagerDBService is the headless Service that gives the database pods stable DNS
// names (<pod>.<statefulset>.<namespace>.svc).
func CloudManagerDBService(cm *appsv1api.CloudManager) *corev1.Service {
	s := &cm.Spec.DB.StatefulSet
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: s.Name, Namespace: cm.Namespace, Labels: CloudManagerLabels(cm, ComponentDB)},
		Spec: corev1.ServiceSpec{
			Type:      corev1.ServiceTypeClusterIP,
			ClusterIP: corev1.ClusterIPNone,
			Selector:  CloudManagerSelector(cm, ComponentDB),
			Ports: []corev1.ServicePort{{
				Name: "mysql", Port: MariaDBPort, TargetPort: intstr.FromInt32(MariaDBPort), Protocol: corev1.ProtocolTCP,
			}},
		},
	}
}

// CloudManagerStorageSize parses spec.db.statefulSet.storage.size.
func CloudManagerStorageSize(cm *appsv1api.CloudManager) (resource.Quantity, error) {
	q, err := resource.ParseQuantity(cm.Spec.DB.StatefulSet.Storage.Size)
	if err != nil {
		return q, fmt.Errorf("spec.db.statefulSet.storage.size %q is not a quantity: %w", cm.Spec.DB.StatefulSet.Storage.Size, err)
	}
	if q.Sign() <= 0 {
		return q, fmt.Errorf("spec.db.statefulSet.storage.size %q must be positive", cm.Spec.DB.StatefulSet.Storage.Size)
	}
	return q, nil
}

// CloudManagerStatefulSet is the database tier's StatefulSet: MariaDB with the root password
// from CloudManagerPasswordSource and one volume per pod from a volumeClaimTemplate. The
// claims are deleted with the StatefulSet. The caller validates the storage size first
// (CloudManagerStorageSize); an invalid size requests no storage.
func CloudManagerStatefulSet(cm *appsv1api.CloudManager) *appsv1.StatefulSet {
	s := &cm.Spec.DB.StatefulSet
	secret, key := CloudManagerPasswordSource(cm)
	size, _ := CloudManagerStorageSize(cm) // validated by the caller, as documented
	mode := s.Storage.AccessModes
	if mode == "" {
		mode = corev1.ReadWriteOnce
	}
	claim := corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: MariaDBDataVolume, Labels: CloudManagerSelector(cm, ComponentDB)},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{mode},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: size}},
		},
	}
	if s.Storage.Class != "" {
		claim.Spec.StorageClassName = ptr.To(s.Storage.Class)
	}
	return &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: s.Name, Namespace: cm.Namespace, Labels: CloudManagerLabels(cm, ComponentDB)},
		Spec: appsv1.StatefulSetSpec{
			Replicas:    ptr.To(TierReplicas(s.Replicas)),
			Selector:    &metav1.LabelSelector{MatchLabels: CloudManagerSelector(cm, ComponentDB)},
			ServiceName: s.Name,
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: CloudManagerLabels(cm, ComponentDB)},
				Spec: corev1.PodSpec{
					SecurityContext: PodSecurityContext(s.Security),
					Containers: []corev1.Container{{
						Name:            ComponentDB,
						Image:           s.Image,
						SecurityContext: ContainerSecurityContext(s.Security),
						Env: []corev1.EnvVar{{
							Name: MariaDBRootPasswordEnv,
							ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
								LocalObjectReference: corev1.LocalObjectReference{Name: secret}, Key: key,
							}},
						}},
						Ports:        []corev1.ContainerPort{{Name: "mysql", ContainerPort: MariaDBPort, Protocol: corev1.ProtocolTCP}},
						VolumeMounts: []corev1.VolumeMount{{Name: MariaDBDataVolume, MountPath: MariaDBDataDir}},
					}},
				},
			},
			VolumeClaimTemplates: []corev1.PersistentVolumeClaim{claim},
			PersistentVolumeClaimRetentionPolicy: &appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{
				WhenDeleted: appsv1.DeletePersistentVolumeClaimRetentionPolicyType,
				WhenScaled:  appsv1.RetainPersistentVolumeClaimRetentionPolicyType,
			},
		},
	}
}
