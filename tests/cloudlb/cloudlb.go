// Package cloudlb stands in, on the local cluster, for a cloud's load-balancer controller:
// the local cluster has no kube-proxy and no cloud provider, so nothing gives a Service of
// type LoadBalancer an address, and nothing would carry traffic to it.
//
// For each LoadBalancer Service in the namespaces it watches, it takes a free loopback
// address in 127.2.0.0/16 (the pods have 127.1.0.0/16), listens there on every port of the
// Service, writes the address into the Service's status.loadBalancer.ingress (as a cloud's
// controller does), and forwards each connection to a pod the Service selects, looked up
// when the connection comes (as kube-proxy follows the endpoints): a pod back at a new IP is
// reached at its new IP. A Service deleted loses its address and listener; one made again
// under the same name gets a new address, as a cloud gives it a new load balancer.
//
// It also stands in for kube-proxy's node ports: for each NodePort Service it listens on
// NodeIP (the address kwok gives every node, and so every pod's status.hostIP) at each
// port's node port, and forwards as above. What differs from a cluster: every node has the
// same address, so a node port is reached at the one address whatever node the pod runs
// on (as with externalTrafficPolicy Cluster); no other node port of the machine's range is
// served.
//
// What differs from a cloud: the address is on this machine's loopback, so nothing stops a
// client from dialing the pods directly (tests enforce that with their own dialer); the
// source address the pod sees is the forwarder's, as behind a proxying load balancer with
// externalTrafficPolicy Cluster; there is no health check, no node hop and no node port;
// not-ready pods are used only when the Service publishes them; and the address comes
// within a poll (200 ms), where a cloud takes seconds to minutes.
package cloudlb

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ExternalPrefix is the address range the load balancers get: 127.2.0.0/16.
const ExternalPrefix = "127.2."

// NodeIP is the address of every node of the local cluster (kwok's --node-ip), where the
// node ports listen.
const NodeIP = "127.0.0.1"

// Controller assigns addresses to LoadBalancer Services and forwards their traffic.
type Controller struct {
	c          client.Client
	namespaces []string
	mu         sync.Mutex
	lbs        map[types.NamespacedName]*balancer
	cancel     context.CancelFunc
	done       chan struct{}
	forwarded  int // connections forwarded to a pod so far
}

// balancer is one Service's address with its listeners.
type balancer struct {
	uid       types.UID // the Service's: one made again under the same name gets another balancer
	ip        string
	listeners []net.Listener
}

// Start watches the LoadBalancer and NodePort Services of namespaces until Stop.
func Start(c client.Client, namespaces ...string) *Controller {
	ctx, cancel := context.WithCancel(context.Background())
	lb := &Controller{c: c, namespaces: namespaces, lbs: map[types.NamespacedName]*balancer{}, cancel: cancel, done: make(chan struct{})}
	go lb.run(ctx)
	return lb
}

// Stop ends the controller and closes every listener (the Services keep their status).
func (lb *Controller) Stop() {
	lb.cancel()
	<-lb.done
	lb.mu.Lock()
	defer lb.mu.Unlock()
	for key, b := range lb.lbs {
		b.close()
		delete(lb.lbs, key)
	}
}

// Forwarded is how many connections were forwarded to a pod so far.
func (lb *Controller) Forwarded() int {
	lb.mu.Lock()
	defer lb.mu.Unlock()
	return lb.forwarded
}

func (lb *Controller) run(ctx context.Context) {
	defer close(lb.done)
	for ctx.Err() == nil {
		for _, ns := range lb.namespaces {
			lb.sync(ctx, ns)
		}
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// sync gives every LoadBalancer Service of ns an address and drops those of the Services
// gone.
func (lb *Controller) sync(ctx context.Context, ns string) {
	list := &corev1.ServiceList{}
	if err := lb.c.List(ctx, list, client.InNamespace(ns)); err != nil {
		return
	}
	seen := map[types.NamespacedName]bool{}
	for i := range list.Items {
		svc := &list.Items[i]
		nodePorts := svc.Spec.Type == corev1.ServiceTypeNodePort
		if (svc.Spec.Type != corev1.ServiceTypeLoadBalancer && !nodePorts) || !svc.DeletionTimestamp.IsZero() {
			continue
		}
		key := client.ObjectKeyFromObject(svc)
		seen[key] = true
		lb.mu.Lock()
		b := lb.lbs[key]
		if b != nil && b.uid != svc.UID { // deleted and made again between two polls
			b.close()
			b = nil
			delete(lb.lbs, key)
		}
		lb.mu.Unlock()
		if b == nil {
			var err error
			if nodePorts {
				b, err = lb.listen(ctx, key, NodeIP, svc.Spec.Ports, func(p corev1.ServicePort) int32 { return p.NodePort })
			} else {
				b, err = lb.open(ctx, key, svc.Spec.Ports)
			}
			if err != nil {
				continue
			}
			b.uid = svc.UID
			lb.mu.Lock()
			lb.lbs[key] = b
			lb.mu.Unlock()
		}
		if !nodePorts && (len(svc.Status.LoadBalancer.Ingress) != 1 || svc.Status.LoadBalancer.Ingress[0].IP != b.ip) {
			svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: b.ip}}
			_ = lb.c.Status().Update(ctx, svc)
		}
	}
	lb.mu.Lock()
	defer lb.mu.Unlock()
	for key, b := range lb.lbs {
		if key.Namespace == ns && !seen[key] {
			b.close()
			delete(lb.lbs, key)
		}
	}
}

// open takes a free address in ExternalPrefix and listens there on every port.
func (lb *Controller) open(ctx context.Context, key types.NamespacedName, ports []corev1.ServicePort) (*balancer, error) {
	for try := 0; try < 50; try++ {
		ip := ExternalPrefix + strconv.Itoa(rand.IntN(254)+1) + "." + strconv.Itoa(rand.IntN(254)+1)
		if b, err := lb.listen(ctx, key, ip, ports, func(p corev1.ServicePort) int32 { return p.Port }); err == nil {
			return b, nil
		}
	}
	return nil, errors.New("no free address in " + ExternalPrefix + "0.0/16")
}

// listen listens on ip at the port of each of ports that port gives, all or none.
func (lb *Controller) listen(ctx context.Context, key types.NamespacedName, ip string, ports []corev1.ServicePort, port func(corev1.ServicePort) int32) (*balancer, error) {
	b := &balancer{ip: ip}
	for _, p := range ports {
		l, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(int(port(p)))))
		if err != nil {
			b.close()
			return nil, err
		}
		b.listeners = append(b.listeners, l)
		go lb.serve(ctx, key, p, l)
	}
	return b, nil
}

func (b *balancer) close() {
	for _, l := range b.listeners {
		_ = l.Close()
	}
}

// serve forwards each connection to l to a pod the Service selects, on the port's target.
func (lb *Controller) serve(ctx context.Context, key types.NamespacedName, port corev1.ServicePort, l net.Listener) {
	for {
		conn, err := l.Accept()
		if err != nil {
			return
		}
		go func() {
			defer func() { _ = conn.Close() }()
			addr, err := lb.backend(ctx, key, port)
			if err != nil {
				return
			}
			backend, err := net.DialTimeout("tcp", addr, 2*time.Second)
			if err != nil {
				return
			}
			defer func() { _ = backend.Close() }()
			lb.mu.Lock()
			lb.forwarded++
			lb.mu.Unlock()
			pipe(conn, backend)
		}()
	}
}

// backend is the address of a running pod the Service selects, read now.
func (lb *Controller) backend(ctx context.Context, key types.NamespacedName, port corev1.ServicePort) (string, error) {
	svc := &corev1.Service{}
	if err := lb.c.Get(ctx, key, svc); err != nil {
		return "", err
	}
	pods := &corev1.PodList{}
	if err := lb.c.List(ctx, pods, client.InNamespace(key.Namespace), client.MatchingLabelsSelector{Selector: labels.SelectorFromSet(svc.Spec.Selector)}); err != nil {
		return "", err
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.Status.PodIP == "" || p.Status.Phase != corev1.PodRunning || !p.DeletionTimestamp.IsZero() || (!svc.Spec.PublishNotReadyAddresses && !ready(p)) {
			continue
		}
		target := int(port.Port)
		if port.TargetPort.IntVal != 0 {
			target = int(port.TargetPort.IntVal)
		}
		return net.JoinHostPort(p.Status.PodIP, strconv.Itoa(target)), nil
	}
	return "", fmt.Errorf("no running pod behind %s", key)
}

func ready(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// pipe copies both ways until either side closes.
func pipe(a, b net.Conn) {
	done := make(chan struct{}, 2)
	cp := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		if c, ok := dst.(*net.TCPConn); ok {
			_ = c.CloseWrite()
		}
		done <- struct{}{}
	}
	go cp(a, b)
	go cp(b, a)
	<-done
	<-done
}
