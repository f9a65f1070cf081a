package apiserver

// pods/proxy and services/proxy: unlike the other connect subresources
// these are served by the API server itself, which dials the pod as
// upstream's pod and service REST ResourceLocation do. The address is
// always a pod's own status.podIPs entry, never one the request names:
// a pod's address must be a global unicast one (no loopback, link-local,
// multicast or unspecified address), and a service's endpoint must be
// the address of the pod of the service's namespace it refers to.

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	utilproxy "k8s.io/apimachinery/pkg/util/proxy"
	apiproxy "k8s.io/apiserver/pkg/util/proxy"
)

// proxyMethods are the methods pods/proxy and services/proxy pass on, as
// upstream's ProxyREST.ConnectMethods.
var proxyMethods = []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch,
	http.MethodDelete, http.MethodHead, http.MethodOptions}

// newPodTransport is upstream's proxy transport (kube-apiserver's
// CreateProxyTransport): a pod's serving certificate is its own, which
// nothing in the cluster vouches for, so https to a pod is not verified.
func newPodTransport() http.RoundTripper {
	return utilnet.SetTransportDefaults(&http.Transport{
		DialContext:     (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true},
	})
}

// servePodProxy proxies pods/NAME[:PORT]/proxy/PATH to the pod.
func (s *Server) servePodProxy(w http.ResponseWriter, r *http.Request, info requestInfo) error {
	scheme, name, port, ok := utilnet.SplitSchemeNamePort(info.Name)
	if !ok {
		return apierrors.NewBadRequest(fmt.Sprintf("invalid pod request %q", info.Name))
	}
	obj, _, err := s.getObject(r.Context(), info.Resource, info.Namespace, name)
	if err != nil {
		return err
	}
	host, err := podProxyHost(obj.(*corev1.Pod), port)
	if err != nil {
		return err
	}
	s.proxyToPod(w, r, &url.URL{Scheme: scheme, Host: host, Path: info.SubPath})
	return nil
}

// podProxyHost is where pods/proxy sends a request for port (a number, a
// container port's name, or empty for the first container port), as
// upstream's pod.ResourceLocation: the pod's first IP, which must be a
// global unicast address.
func podProxyHost(pod *corev1.Pod, port string) (string, error) {
	ip := ""
	if len(pod.Status.PodIPs) > 0 {
		ip = pod.Status.PodIPs[0].IP
	}
	if addr := net.ParseIP(ip); addr == nil || !addr.IsGlobalUnicast() {
		return "", apierrors.NewBadRequest("address not allowed")
	}
	port, err := podPort(pod, port)
	if err != nil {
		return "", err
	}
	if port == "" {
		// No port: the scheme's own. An IPv6 address needs its brackets.
		if strings.Contains(ip, ":") {
			return "[" + ip + "]", nil
		}
		return ip, nil
	}
	return net.JoinHostPort(ip, port), nil
}

// podPort resolves the port of a pods/proxy request to a number (or ""
// when neither the request nor the pod names one). Upstream passes a
// name on to the dialer, which reads it from /etc/services; a name here
// must be one of the pod's container ports instead, so that "pod:http"
// means the pod's port called http.
func podPort(pod *corev1.Pod, port string) (string, error) {
	if port == "" {
		for _, c := range pod.Spec.Containers {
			if len(c.Ports) > 0 {
				return strconv.Itoa(int(c.Ports[0].ContainerPort)), nil
			}
		}
		return "", nil
	}
	if n, err := strconv.Atoi(port); err == nil {
		if n < 1 || n > 65535 {
			return "", apierrors.NewBadRequest(fmt.Sprintf("invalid port %q for pod %q", port, pod.Name))
		}
		return port, nil
	}
	for _, c := range pod.Spec.Containers {
		for _, p := range c.Ports {
			if p.Name == port {
				return strconv.Itoa(int(p.ContainerPort)), nil
			}
		}
	}
	return "", apierrors.NewBadRequest(fmt.Sprintf("pod %q has no port named %q", pod.Name, port))
}

// serveServiceProxy proxies services/NAME[:PORT]/proxy/PATH to a ready
// endpoint of the service (upstream's service REST ResourceLocation).
func (s *Server) serveServiceProxy(w http.ResponseWriter, r *http.Request, info requestInfo) error {
	scheme, name, port, ok := utilnet.SplitSchemeNamePort(info.Name)
	if !ok {
		return apierrors.NewBadRequest(fmt.Sprintf("invalid service request %q", info.Name))
	}
	ctx := r.Context()
	portName := port
	if n, err := strconv.ParseInt(port, 10, 32); err == nil {
		obj, _, err := s.getObject(ctx, info.Resource, info.Namespace, name)
		if err != nil {
			return err
		}
		if portName, err = servicePortName(obj.(*corev1.Service), int32(n)); err != nil {
			return err
		}
	}
	slices, err := s.serviceEndpointSlices(ctx, info.Namespace, name)
	if err != nil {
		return err
	}
	// The cluster is IPv4 single-stack: admission gives every Service IPv4.
	host, err := apiproxy.RandomEndpoint(name, slices, portName, corev1.IPv4Protocol, func(ep *discoveryv1.Endpoint) bool {
		return s.isPodEndpoint(ctx, info.Namespace, ep)
	})
	if err != nil {
		return err
	}
	s.proxyToPod(w, r, &url.URL{Scheme: scheme, Host: host, Path: info.SubPath})
	return nil
}

// servicePortName names the service port numbered port, as upstream: an
// endpoint's ports are matched by name ("" for a single unnamed port).
func servicePortName(svc *corev1.Service, port int32) (string, error) {
	for _, p := range svc.Spec.Ports {
		if p.Port == port {
			return p.Name, nil
		}
	}
	return "", apierrors.NewServiceUnavailable(fmt.Sprintf("no service port %d found for service %q", port, svc.Name))
}

// serviceEndpointSlices returns the EndpointSlices of service ns/name.
func (s *Server) serviceEndpointSlices(ctx context.Context, ns, name string) ([]*discoveryv1.EndpointSlice, error) {
	res := s.Resource(discoveryv1.GroupName, "endpointslices")
	if res == nil {
		return nil, apierrors.NewServiceUnavailable(fmt.Sprintf("no endpoints available for service %q", name))
	}
	q := url.Values{"labelSelector": {discoveryv1.LabelServiceName + "=" + name}}
	items, _, err := s.listMatching(ctx, requestInfo{Resource: res, Namespace: ns}, q)
	if err != nil {
		return nil, fmt.Errorf("list endpoint slices of service %s/%s: %w", ns, name, err)
	}
	out := make([]*discoveryv1.EndpointSlice, 0, len(items))
	for _, o := range items {
		out = append(out, o.(*discoveryv1.EndpointSlice))
	}
	return out, nil
}

// isPodEndpoint reports whether ep may be proxied to: its address is a
// global unicast one and an IP of the pod of namespace ns it refers to
// (upstream's isValidAddress), so that no EndpointSlice a user writes
// can point the API server at another address.
func (s *Server) isPodEndpoint(ctx context.Context, ns string, ep *discoveryv1.Endpoint) bool {
	ref := ep.TargetRef
	if ref == nil || ref.Kind != "Pod" || ref.Namespace != ns || len(ep.Addresses) == 0 {
		return false
	}
	addr := ep.Addresses[0] // as upstream: only the first is used
	if ip := net.ParseIP(addr); ip == nil || !ip.IsGlobalUnicast() {
		return false
	}
	obj, _, err := s.getObject(ctx, s.Resource("", "pods"), ns, ref.Name)
	if err != nil {
		s.log.Debug("service proxy: endpoint skipped", "namespace", ns, "pod", ref.Name, "err", err)
		return false
	}
	return slices.ContainsFunc(obj.(*corev1.Pod).Status.PodIPs, func(ip corev1.PodIP) bool { return ip.IP == addr })
}

// proxyToPod proxies r to loc with upstream's proxy handler: X-Forwarded-*
// headers, links and redirects of HTML answers rewritten under the
// request's path, upgrades (WebSocket) passed through.
func (s *Server) proxyToPod(w http.ResponseWriter, r *http.Request, loc *url.URL) {
	h := utilproxy.NewUpgradeAwareHandler(loc, s.podTransport, true, false, proxyResponder{s, "pod"})
	h.ServeHTTP(w, r)
}
