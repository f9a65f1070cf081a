package apiserver

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"

	"github.com/nodelet/nodelet/controlplane/registry"
)

// The resource metrics API (metrics.k8s.io/v1beta1) is served here rather
// than by an aggregated metrics-server: NodeMetrics and PodMetrics come
// from a MetricsSource (the nodelets' summaries) and are never stored.
// The answers match metrics-server's: get and list only, label and field
// (metadata.name, metadata.namespace) selectors on the measured objects'
// labels, NotFound as nodemetrics/podmetrics, tables with the usage
// columns, and JSON or protobuf (kubectl top asks for protobuf).

// MetricsSource provides the current resource metrics.
type MetricsSource interface {
	NodeMetrics(ctx context.Context) ([]metricsv1beta1.NodeMetrics, error)
	// PodMetrics of one namespace ("" = all namespaces).
	PodMetrics(ctx context.Context, namespace string) ([]metricsv1beta1.PodMetrics, error)
}

var metricsGV = metricsv1beta1.SchemeGroupVersion

// metricsNodes and metricsPods describe the two resources for discovery
// and output (type meta, selectors, tables); they are not in the registry.
var (
	metricsNodes = &registry.Resource{
		GroupVersion: metricsGV, Name: "nodes", Kind: "NodeMetrics", ListKind: "NodeMetricsList",
		Verbs:   []string{"get", "list"},
		New:     func() runtime.Object { return &metricsv1beta1.NodeMetrics{} },
		NewList: func() runtime.Object { return &metricsv1beta1.NodeMetricsList{} },
		Columns: metricsColumns,
		Row: func(obj runtime.Object, _ time.Time) []interface{} {
			m := obj.(*metricsv1beta1.NodeMetrics)
			return metricsRow(m.Name, m.Usage, m.Window.Duration)
		},
	}
	metricsPods = &registry.Resource{
		GroupVersion: metricsGV, Name: "pods", Kind: "PodMetrics", ListKind: "PodMetricsList", Namespaced: true,
		Verbs:   []string{"get", "list"},
		New:     func() runtime.Object { return &metricsv1beta1.PodMetrics{} },
		NewList: func() runtime.Object { return &metricsv1beta1.PodMetricsList{} },
		Columns: metricsColumns,
		Row: func(obj runtime.Object, _ time.Time) []interface{} {
			m := obj.(*metricsv1beta1.PodMetrics)
			sum := corev1.ResourceList{}
			for _, c := range m.Containers {
				for name, q := range c.Usage {
					total := sum[name]
					total.Add(q)
					sum[name] = total
				}
			}
			return metricsRow(m.Name, sum, m.Window.Duration)
		},
	}
)

var metricsColumns = []metav1.TableColumnDefinition{
	{Name: "Name", Type: "string", Format: "name", Description: "Name of the resource"},
	{Name: "CPU", Type: "string", Format: "quantity", Description: "CPU usage"},
	{Name: "Memory", Type: "string", Format: "quantity", Description: "Memory usage (working set)"},
	{Name: "Window", Type: "string", Format: "duration", Description: "Interval the usage was measured over"},
}

func metricsRow(name string, usage corev1.ResourceList, window time.Duration) []interface{} {
	cpu, mem := usage[corev1.ResourceCPU], usage[corev1.ResourceMemory]
	return []interface{}{name, cpu.String(), mem.String(), window.String()}
}

// metricsResourceList is the discovery document of metrics.k8s.io/v1beta1.
func metricsResourceList() *metav1.APIResourceList {
	list := &metav1.APIResourceList{TypeMeta: metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"}, GroupVersion: metricsGV.String()}
	for _, res := range []*registry.Resource{metricsNodes, metricsPods} {
		list.APIResources = append(list.APIResources, metav1.APIResource{
			Name: res.Name, Namespaced: res.Namespaced, Kind: res.Kind, Verbs: res.Verbs,
		})
	}
	return list
}

// isMetricsRequest reports whether a resource request is for the metrics
// API and the server serves it.
func (s *Server) isMetricsRequest(info requestInfo) bool {
	return s.cfg.Metrics != nil && info.GV == metricsGV
}

// serveMetrics answers an authorized request for metrics.k8s.io/v1beta1.
func (s *Server) serveMetrics(w http.ResponseWriter, r *http.Request, info requestInfo) {
	if err := s.metricsRequest(w, r, info); err != nil {
		var status apierrors.APIStatus
		if !errors.As(err, &status) {
			s.log.Error("metrics request failed", "verb", info.Verb, "resource", info.ResourceArg, "namespace", info.Namespace, "name", info.Name, "err", err)
		}
		writeError(w, err)
	}
}

func (s *Server) metricsRequest(w http.ResponseWriter, r *http.Request, info requestInfo) error {
	var res *registry.Resource
	switch info.ResourceArg {
	case metricsNodes.Name:
		res = metricsNodes
	case metricsPods.Name:
		res = metricsPods
	}
	switch {
	case res == nil:
		return apierrors.NewNotFound(schemaGR(metricsGV.Group, info.ResourceArg), "")
	case info.Subresource != "",
		!res.Namespaced && info.Namespace != "",
		res.Namespaced && info.Namespace == "" && info.Name != "":
		return apierrors.NewNotFound(groupResource(res), info.Name)
	}
	if info.Verb != "get" && info.Verb != "list" {
		return apierrors.NewMethodNotSupported(groupResource(res), info.Verb)
	}
	var obj runtime.Object
	var err error
	if info.Verb == "get" {
		obj, err = s.getMetrics(r.Context(), res, info.Namespace, info.Name)
	} else {
		obj, err = s.listMetrics(r, res, info.Namespace)
	}
	if err != nil {
		return err
	}
	return s.writeObject(w, r, http.StatusOK, res, obj)
}

// getMetrics returns the metrics of one node or pod; NotFound names them
// as metrics-server does (nodemetrics "NAME", podmetrics "NAMESPACE/NAME").
func (s *Server) getMetrics(ctx context.Context, res *registry.Resource, namespace, name string) (runtime.Object, error) {
	if res == metricsNodes {
		items, err := s.cfg.Metrics.NodeMetrics(ctx)
		if err != nil {
			return nil, fmt.Errorf("read node metrics: %w", err)
		}
		for i := range items {
			if items[i].Name == name {
				return &items[i], nil
			}
		}
		return nil, apierrors.NewNotFound(metricsv1beta1.Resource("nodemetrics"), name)
	}
	items, err := s.cfg.Metrics.PodMetrics(ctx, namespace)
	if err != nil {
		return nil, fmt.Errorf("read pod metrics of namespace %q: %w", namespace, err)
	}
	for i := range items {
		if items[i].Name == name && items[i].Namespace == namespace {
			return &items[i], nil
		}
	}
	return nil, apierrors.NewNotFound(metricsv1beta1.Resource("podmetrics"), namespace+"/"+name)
}

// listMetrics returns the list of res in namespace ("" = all) that
// matches the request's selectors.
func (s *Server) listMetrics(r *http.Request, res *registry.Resource, namespace string) (runtime.Object, error) {
	match, err := newMatcher(res, r.URL.Query())
	if err != nil {
		return nil, err
	}
	ctx := r.Context()
	if res == metricsNodes {
		items, err := s.cfg.Metrics.NodeMetrics(ctx)
		if err != nil {
			return nil, fmt.Errorf("read node metrics: %w", err)
		}
		list := &metricsv1beta1.NodeMetricsList{Items: []metricsv1beta1.NodeMetrics{}}
		for i := range items {
			if match.matches(&items[i]) {
				list.Items = append(list.Items, items[i])
			}
		}
		return list, nil
	}
	items, err := s.cfg.Metrics.PodMetrics(ctx, namespace)
	if err != nil {
		return nil, fmt.Errorf("read pod metrics of namespace %q: %w", namespace, err)
	}
	list := &metricsv1beta1.PodMetricsList{Items: []metricsv1beta1.PodMetrics{}}
	for i := range items {
		if (namespace == "" || items[i].Namespace == namespace) && match.matches(&items[i]) {
			list.Items = append(list.Items, items[i])
		}
	}
	return list, nil
}
