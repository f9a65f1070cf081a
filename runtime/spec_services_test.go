package runtime

import (
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func svc(ns, name, ip string, ports ...corev1.ServicePort) *corev1.Service {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.ServiceSpec{ClusterIP: ip, Ports: ports}}
}

func TestServiceEnv(t *testing.T) {
	env := ServiceEnv([]*corev1.Service{
		svc("prod", "my-db", "10.96.0.7", corev1.ServicePort{Name: "sql", Port: 5432}, corev1.ServicePort{Name: "metrics", Port: 9187, Protocol: corev1.ProtocolUDP}),
		svc("prod", "headless", corev1.ClusterIPNone, corev1.ServicePort{Port: 80}),
	})
	want := map[string]string{
		"MY_DB_SERVICE_HOST":         "10.96.0.7",
		"MY_DB_SERVICE_PORT":         "5432",
		"MY_DB_SERVICE_PORT_SQL":     "5432",
		"MY_DB_SERVICE_PORT_METRICS": "9187",
		"MY_DB_PORT":                 "tcp://10.96.0.7:5432",
		"MY_DB_PORT_5432_TCP":        "tcp://10.96.0.7:5432",
		"MY_DB_PORT_5432_TCP_PROTO":  "tcp",
		"MY_DB_PORT_5432_TCP_PORT":   "5432",
		"MY_DB_PORT_5432_TCP_ADDR":   "10.96.0.7",
		"MY_DB_PORT_9187_UDP":        "udp://10.96.0.7:9187",
		"MY_DB_PORT_9187_UDP_PROTO":  "udp",
		"MY_DB_PORT_9187_UDP_PORT":   "9187",
		"MY_DB_PORT_9187_UDP_ADDR":   "10.96.0.7",
	}
	if !reflect.DeepEqual(env, want) {
		t.Errorf("ServiceEnv:\n got %v\nwant %v", env, want)
	}
}

func TestPodServices(t *testing.T) {
	kube := svc("default", "kubernetes", "10.96.0.1", corev1.ServicePort{Name: "https", Port: 443})
	all := []*corev1.Service{kube, svc("prod", "web", "10.96.0.9", corev1.ServicePort{Port: 80}),
		svc("other", "web2", "10.96.0.10", corev1.ServicePort{Port: 80})}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "prod"}}
	names := func(l []*corev1.Service) string {
		var s []string
		for _, x := range l {
			s = append(s, x.Namespace+"/"+x.Name)
		}
		return strings.Join(s, ",")
	}
	if got := names(PodServices(all, pod)); got != "default/kubernetes,prod/web" {
		t.Errorf("PodServices = %s", got)
	}
	no := false
	pod.Spec.EnableServiceLinks = &no
	if got := names(PodServices(all, pod)); got != "default/kubernetes" {
		t.Errorf("enableServiceLinks false: %s", got)
	}
	// The container's own variables win; $(VAR) may use service variables.
	c := &corev1.Container{Name: "app", Env: []corev1.EnvVar{
		{Name: "KUBERNETES_SERVICE_HOST", Value: "mine"},
		{Name: "URL", Value: "https://$(KUBERNETES_SERVICE_HOST):$(KUBERNETES_SERVICE_PORT)"},
	}}
	env, err := ContainerEnv(pod, c, EnvContext{Services: ServiceEnv(PodServices(all, pod))})
	if err != nil {
		t.Fatal(err)
	}
	joined := strings.Join(env, "\n")
	if !strings.Contains(joined, "KUBERNETES_SERVICE_HOST=mine") || strings.Contains(joined, "KUBERNETES_SERVICE_HOST=10.96.0.1") ||
		!strings.Contains(joined, "URL=https://mine:443") || !strings.Contains(joined, "KUBERNETES_PORT_443_TCP_ADDR=10.96.0.1") {
		t.Errorf("env:\n%s", joined)
	}
}
