// Package olm tests that Operator Lifecycle Manager installs the operator from our catalog and
// upgrades it along the stable channel, on the local cluster (tests/localcluster) and without
// images.
//
// The test installs OLM's CRDs (server-side apply of deploy/chart/crds from the OLM module
// pinned in hack/tools/olm), runs OLM's own olm and catalog operators (v0.38.0, built from
// that module) out of cluster against the cluster, serves catalog/ with `opm serve` on a
// loopback port, and then does what a user does: a CatalogSource (grpc, spec.address), an
// OperatorGroup and a Subscription. OLM resolves the package, creates and runs the
// InstallPlan, and the CSV reaches Succeeded once its Deployment is Available on kwok nodes.
// With the examples of the CSV's alm-examples created, the catalog gains the next version and
// OLM upgrades along the channel; the custom resources stay and are still reconciled
// (TestInstallAndUpgradeThroughOLM, SingleNamespace). TestInstallModesScopeTheOperator installs
// the current bundle in OwnNamespace mode, where the operator reconciles the three kinds in its
// namespace and its token is Forbidden from the Secrets of any other, then in AllNamespaces
// mode, where OLM grants the same rules in every namespace.
//
// What differs from OLM on a real cluster, and why:
//
//   - olm and catalog run as processes next to the cluster with an admin kubeconfig, not as
//     Deployments in the olm namespace with their ServiceAccounts; they bind their fixed
//     health/metrics ports (:8080 for olm, :8443 for catalog, which therefore gets a
//     certificate) on this machine.
//   - The catalog is served by `opm serve` on 127.0.0.1 and named by the CatalogSource's
//     spec.address, rather than by a registry pod OLM starts from a catalog image
//     (spec.image); a catalog update is a restart of opm serve on the same port rather than a
//     new image that OLM polls for (spec.updateStrategy.registryPoll).
//   - The bundles are inlined in the catalog (olm.bundle.object, rendered by opm render from
//     the bundle directories), so OLM takes the manifests from the catalog and starts no
//     bundle unpack Job; an image-referenced bundle would need that Job's pod to really run.
//     OLM's resolving, InstallPlan, CSV, RBAC, Deployment and upgrade logic are the real ones.
//   - kwok plays kubelet: the operator's pods are scheduled and become Ready, but no container
//     runs and no image is pulled. So that the custom resources are really reconciled, the
//     test runs the operator binary (built from this repository) out of cluster, with what the
//     pods would have: the arguments of the Deployment OLM created, WATCH_NAMESPACE from the
//     pod's olm.targetNamespaces annotation (what the fieldRef resolves to), and the
//     credentials of the ServiceAccount OLM created, so it works with exactly the RBAC OLM
//     granted. Both bundle versions run that same binary; after the upgrade the process is
//     restarted with the new pods' settings, as the Deployment rollout would.
package olm
