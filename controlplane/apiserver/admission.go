package apiserver

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Node ports come from upstream's default range.
const (
	nodePortMin = 30000
	nodePortMax = 32767
)

// ownAdmission holds the allocations that need state beyond the object
// itself, done by the server rather than by a plugin of the chain
// (admit.go): Service cluster IPs and node ports, as upstream's Service
// REST allocates them.
//
// Allocations are derived from the stored Services plus the reservations
// of creates still in flight, so nothing leaks across crashes or failed
// creates. One API server owns allocation; with several (etcd), it moves
// into storage.
type ownAdmission struct {
	s       *Server
	cidr    netip.Prefix
	mu      sync.Mutex
	pending map[netip.Addr]bool
	ports   map[int32]bool
}

func newAdmission(s *Server, serviceCIDR string) (*ownAdmission, error) {
	p, err := netip.ParsePrefix(serviceCIDR)
	if err != nil || !p.Addr().Is4() || p.Bits() > 30 {
		return nil, fmt.Errorf("service CIDR %q: want an IPv4 prefix of /30 or larger", serviceCIDR)
	}
	return &ownAdmission{s: s, cidr: p.Masked(), pending: map[netip.Addr]bool{}, ports: map[int32]bool{}}, nil
}

// allocate gives a Service its cluster IP and node ports, after defaults
// and before validation. The returned func ends the reservation and must
// be called once the object is stored or abandoned.
func (a *ownAdmission) allocate(ctx context.Context, obj runtime.Object) (func(), error) {
	svc, ok := obj.(*corev1.Service)
	if !ok || a.s.Resource("", "services") == nil {
		return func() {}, nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	ips, ports, err := a.usedLocked(ctx, svc)
	if err != nil {
		return nil, err
	}
	var ip netip.Addr
	if ip, err = a.clusterIPLocked(svc, ips); err != nil {
		return nil, err
	}
	var newPorts []int32
	if newPorts, err = a.nodePortsLocked(svc, ports); err != nil {
		return nil, err
	}
	if ip.IsValid() {
		a.pending[ip] = true
	}
	for _, p := range newPorts {
		a.ports[p] = true
	}
	return func() {
		a.mu.Lock()
		delete(a.pending, ip)
		for _, p := range newPorts {
			delete(a.ports, p)
		}
		a.mu.Unlock()
	}, nil
}

// usedLocked collects the cluster IPs and node ports held by stored
// Services other than svc, and by reservations in flight.
func (a *ownAdmission) usedLocked(ctx context.Context, svc *corev1.Service) (map[netip.Addr]bool, map[int32]bool, error) {
	items, _, err := a.s.listMatching(ctx, requestInfo{Resource: a.s.Resource("", "services")}, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("list services for allocation: %w", err)
	}
	ips, ports := map[netip.Addr]bool{}, map[int32]bool{}
	for ip := range a.pending {
		ips[ip] = true
	}
	for p := range a.ports {
		ports[p] = true
	}
	for _, o := range items {
		other := o.(*corev1.Service)
		if other.Namespace == svc.Namespace && other.Name == svc.Name {
			continue
		}
		if ip, err := netip.ParseAddr(other.Spec.ClusterIP); err == nil {
			ips[ip] = true
		}
		for _, p := range other.Spec.Ports {
			if p.NodePort != 0 {
				ports[p.NodePort] = true
			}
		}
	}
	return ips, ports, nil
}

// clusterIPLocked picks or checks the Service's cluster IP. It returns the
// address newly reserved (invalid when none is).
func (a *ownAdmission) clusterIPLocked(svc *corev1.Service, used map[netip.Addr]bool) (netip.Addr, error) {
	if svc.Spec.Type == corev1.ServiceTypeExternalName || svc.Spec.ClusterIP == corev1.ClusterIPNone {
		return netip.Addr{}, nil
	}
	path := field.NewPath("spec", "clusterIP")
	if svc.Spec.ClusterIP != "" {
		ip, err := netip.ParseAddr(svc.Spec.ClusterIP)
		if err != nil || !a.cidr.Contains(ip) {
			return ip, apierrors.NewInvalid(schemaGK("", "Service"), svc.Name, field.ErrorList{field.Invalid(path, svc.Spec.ClusterIP,
				fmt.Sprintf("failed to allocate IP %s: provided IP is not in the valid range. The range of valid IPs is %s", svc.Spec.ClusterIP, a.cidr))})
		}
		if used[ip] {
			return ip, apierrors.NewInvalid(schemaGK("", "Service"), svc.Name, field.ErrorList{field.Invalid(path, svc.Spec.ClusterIP,
				fmt.Sprintf("failed to allocate IP %s: provided IP is already allocated", svc.Spec.ClusterIP))})
		}
		setClusterIP(svc, ip)
		return ip, nil
	}
	// Lowest free address first, skipping the network address: the first
	// Service (kubernetes) gets .1 as users expect. Upstream picks at random.
	last := lastAddr(a.cidr)
	for ip := a.cidr.Addr().Next(); ip.Less(last); ip = ip.Next() {
		if !used[ip] {
			setClusterIP(svc, ip)
			return ip, nil
		}
	}
	return netip.Addr{}, apierrors.NewInternalError(errors.New("no service cluster IP is free in " + a.cidr.String()))
}

func setClusterIP(svc *corev1.Service, ip netip.Addr) {
	svc.Spec.ClusterIP = ip.String()
	svc.Spec.ClusterIPs = []string{ip.String()}
	svc.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv4Protocol}
}

func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Addr().As4()
	host := uint32(1)<<(32-p.Bits()) - 1
	v := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3]) | host
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}

// nodePortsLocked gives NodePort and LoadBalancer Services a node port per
// port that lacks one, and checks requested ones. It returns the ports
// newly reserved.
func (a *ownAdmission) nodePortsLocked(svc *corev1.Service, used map[int32]bool) ([]int32, error) {
	if svc.Spec.Type != corev1.ServiceTypeNodePort && svc.Spec.Type != corev1.ServiceTypeLoadBalancer {
		return nil, nil
	}
	var reserved []int32
	next := int32(nodePortMin)
	for i := range svc.Spec.Ports {
		p := &svc.Spec.Ports[i]
		path := field.NewPath("spec", "ports").Index(i).Child("nodePort")
		if p.NodePort != 0 {
			if p.NodePort < nodePortMin || p.NodePort > nodePortMax {
				return nil, apierrors.NewInvalid(schemaGK("", "Service"), svc.Name, field.ErrorList{field.Invalid(path, p.NodePort,
					fmt.Sprintf("provided port is not in the valid range. The range of valid ports is %d-%d", nodePortMin, nodePortMax))})
			}
			if used[p.NodePort] {
				return nil, apierrors.NewInvalid(schemaGK("", "Service"), svc.Name, field.ErrorList{field.Invalid(path, p.NodePort, "provided port is already allocated")})
			}
			used[p.NodePort] = true
			reserved = append(reserved, p.NodePort)
			continue
		}
		for next <= nodePortMax && used[next] {
			next++
		}
		if next > nodePortMax {
			return nil, apierrors.NewInternalError(errors.New("no node port is free"))
		}
		p.NodePort = next
		used[next] = true
		reserved = append(reserved, next)
	}
	return reserved, nil
}

// ClusterDNSServiceIP is the default address of the cluster DNS (the
// kube-dns Service), as kubeadm picks it: the tenth address of the service
// CIDR (10.96.0.10 for 10.96.0.0/12).
func ClusterDNSServiceIP(cidr string) (netip.Addr, error) {
	p, err := netip.ParsePrefix(cidr)
	if err != nil {
		return netip.Addr{}, err
	}
	ip := p.Masked().Addr()
	for range 10 {
		ip = ip.Next()
	}
	if !p.Contains(ip) {
		return netip.Addr{}, fmt.Errorf("service CIDR %s has no tenth address", cidr)
	}
	return ip, nil
}

// FirstServiceIP is the address of the kubernetes Service: the first
// address of the service CIDR.
func FirstServiceIP(cidr string) (netip.Addr, error) {
	p, err := netip.ParsePrefix(cidr)
	if err != nil {
		return netip.Addr{}, err
	}
	return p.Masked().Addr().Next(), nil
}
