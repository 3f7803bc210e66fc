// Package localcluster starts a real Kubernetes control plane on this machine from binaries
// the project builds from Go modules (see hack/tools): etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler and kwok, which plays kubelet for fake nodes whose
// pods get loopback IPs in 127.1.0.0/16.
//
// Every component listens on a free loopback port, so several clusters can run at once.
// Stop (or the death of the process that started them) leaves no process and no port behind.
package localcluster
