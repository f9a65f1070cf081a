package apiserver

// The connect subresources: pods/log, pods/exec, pods/attach,
// pods/portforward and nodes/proxy are served by the pod's node. The API
// server checks the request, finds the node's nodelet from its Node
// object (NodeConnector) and proxies: plain GETs through a reverse proxy,
// SPDY upgrades through apimachinery's UpgradeAwareHandler, and the
// WebSocket protocols kubectl 1.30+ prefers through apiserver's
// translators (v5.channel.k8s.io to SPDY for exec/attach, the tunnelling
// handler for port-forward), as upstream does. Only the node's own API is
// ever dialled: the location is built from the Node, never from the
// request. pods/proxy and services/proxy go to the pod itself
// (proxy_targets.go).

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"path"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/httpstream/wsstream"
	utilproxy "k8s.io/apimachinery/pkg/util/proxy"
	apiproxy "k8s.io/apiserver/pkg/util/proxy"
)

// NodeConnector tells the API server how to reach a node's nodelet: the
// base URL of its HTTPS API (from the Node's addresses and
// status.daemonEndpoints) and a transport that verifies the nodelet's
// serving certificate and presents the API server's client identity.
type NodeConnector interface {
	NodeLocation(node *corev1.Node) (*url.URL, http.RoundTripper, error)
}

// connectSubresources are the pod subresources served by proxying: by the
// node, but for proxy (to the pod itself, proxy_targets.go).
var connectSubresources = map[string]bool{"log": true, "exec": true, "attach": true, "portforward": true, "proxy": true}

// isConnect reports whether info is a connect request (served by proxying).
func isConnect(info requestInfo) bool {
	switch info.Resource.GroupVersionResource() {
	case corev1.SchemeGroupVersion.WithResource("pods"):
		return connectSubresources[info.Subresource]
	case corev1.SchemeGroupVersion.WithResource("nodes"), corev1.SchemeGroupVersion.WithResource("services"):
		return info.Subresource == "proxy"
	}
	return false
}

// serveConnect serves one connect subresource request.
func (s *Server) serveConnect(w http.ResponseWriter, r *http.Request, info requestInfo) error {
	// The caller's credentials are for us, not for the node or pod.
	r.Header.Del("Authorization")
	if info.Subresource == "proxy" {
		return s.serveProxy(w, r, info)
	}
	if info.SubPath != "" {
		return apierrors.NewNotFound(groupResource(info.Resource), info.Name+"/"+info.Subresource+info.SubPath)
	}
	if s.cfg.Nodes == nil {
		return errNoNodes
	}
	if info.Subresource == "log" && r.Method != http.MethodGet {
		return apierrors.NewMethodNotSupported(groupResource(info.Resource), r.Method)
	}
	if info.Subresource != "log" && r.Method != http.MethodGet && r.Method != http.MethodPost {
		return apierrors.NewMethodNotSupported(groupResource(info.Resource), r.Method)
	}
	obj, _, err := s.getObject(r.Context(), info.Resource, info.Namespace, info.Name)
	if err != nil {
		return err
	}
	pod := obj.(*corev1.Pod)
	q := r.URL.Query()
	switch info.Subresource {
	case "log":
		return s.servePodLog(w, r, pod, q)
	case "exec", "attach":
		return s.serveStream(w, r, pod, info.Subresource, q)
	default:
		return s.servePortForward(w, r, pod)
	}
}

// errNoNodes answers what needs a node when no NodeConnector is set.
var errNoNodes = apierrors.NewServiceUnavailable("this API server cannot reach nodes")

// serveProxy serves the proxy subresources of nodes, pods and services.
func (s *Server) serveProxy(w http.ResponseWriter, r *http.Request, info requestInfo) error {
	if !slices.Contains(proxyMethods, r.Method) {
		return apierrors.NewMethodNotSupported(groupResource(info.Resource), r.Method)
	}
	switch info.Resource.Name {
	case "pods":
		return s.servePodProxy(w, r, info)
	case "services":
		return s.serveServiceProxy(w, r, info)
	}
	if s.cfg.Nodes == nil {
		return errNoNodes
	}
	return s.serveNodeProxy(w, r, info)
}

// nodeOf returns the base URL and transport of the nodelet running pod.
func (s *Server) nodeOf(r *http.Request, pod *corev1.Pod) (*url.URL, http.RoundTripper, error) {
	if pod.Spec.NodeName == "" {
		return nil, nil, apierrors.NewBadRequest(fmt.Sprintf("pod %s does not have a host assigned", pod.Name))
	}
	return s.nodeLocation(r, pod.Spec.NodeName)
}

func (s *Server) nodeLocation(r *http.Request, nodeName string) (*url.URL, http.RoundTripper, error) {
	obj, _, err := s.getObject(r.Context(), s.Resource("", "nodes"), "", nodeName)
	if err != nil {
		return nil, nil, err
	}
	loc, rt, err := s.cfg.Nodes.NodeLocation(obj.(*corev1.Node))
	if err != nil {
		return nil, nil, apierrors.NewServiceUnavailable(err.Error())
	}
	return loc, rt, nil
}

// podContainer resolves the container a request names: the only one when
// it names none, else one of the pod's (init, app or ephemeral) containers.
func podContainer(pod *corev1.Pod, name string) (string, error) {
	if name == "" {
		if len(pod.Spec.Containers) == 1 {
			return pod.Spec.Containers[0].Name, nil
		}
		return "", apierrors.NewBadRequest(fmt.Sprintf("a container name must be specified for pod %s, choose one of: %v", pod.Name, containerNames(pod.Spec.Containers)))
	}
	for _, list := range [][]corev1.Container{pod.Spec.Containers, pod.Spec.InitContainers} {
		for _, c := range list {
			if c.Name == name {
				return name, nil
			}
		}
	}
	for _, c := range pod.Spec.EphemeralContainers {
		if c.Name == name {
			return name, nil
		}
	}
	return "", apierrors.NewBadRequest(fmt.Sprintf("container %s is not valid for pod %s", name, pod.Name))
}

func containerNames(cs []corev1.Container) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.Name
	}
	return out
}

// servePortForward proxies pods/portforward: SPDY as it is, WebSocket
// tunnelled (kubectl 1.31+ speaks SPDY inside a WebSocket).
func (s *Server) servePortForward(w http.ResponseWriter, r *http.Request, pod *corev1.Pod) error {
	base, rt, err := s.nodeOf(r, pod)
	if err != nil {
		return err
	}
	loc := *base
	loc.Path = path.Join("/portForward", pod.Namespace, pod.Name)
	var h http.Handler = s.upgradeHandler(&loc, rt, true)
	if wsstream.IsWebSocketRequestWithTunnelingProtocol(r) {
		h = apiproxy.NewTunnelingHandler(h)
	}
	h.ServeHTTP(w, r)
	return nil
}

// serveNodeProxy proxies nodes/{name}/proxy/{path} to the node's own API.
// The name may not carry a port or scheme: this is no open proxy.
func (s *Server) serveNodeProxy(w http.ResponseWriter, r *http.Request, info requestInfo) error {
	if strings.ContainsAny(info.Name, ":/") {
		return apierrors.NewBadRequest(fmt.Sprintf("invalid node name %q: only the node's own API can be proxied", info.Name))
	}
	base, rt, err := s.nodeLocation(r, info.Name)
	if err != nil {
		return err
	}
	loc := *base
	loc.Path = info.SubPath
	if loc.Path == "" {
		loc.Path = "/"
	}
	s.upgradeHandler(&loc, rt, false).ServeHTTP(w, r)
	return nil
}

func (s *Server) upgradeHandler(loc *url.URL, rt http.RoundTripper, upgradeRequired bool) *utilproxy.UpgradeAwareHandler {
	h := utilproxy.NewUpgradeAwareHandler(loc, rt, false, upgradeRequired, proxyResponder{s, "node"})
	h.RejectForwardingRedirects = true
	return h
}

// proxyResponder answers a failed proxy attempt with a Status; target
// ("node", "pod") is for the log.
type proxyResponder struct {
	s      *Server
	target string
}

func (p proxyResponder) Error(w http.ResponseWriter, r *http.Request, err error) {
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		writeError(w, err)
		return
	}
	p.s.log.Info("proxy to "+p.target+" failed", "path", r.URL.Path, "err", err)
	writeError(w, apierrors.NewServiceUnavailable(err.Error()))
}
