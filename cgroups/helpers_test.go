package cgroups

import (
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// rl parses "cpu=500m,memory=128Mi" into a ResourceList ("" is nil).
func rl(t testing.TB, s string) corev1.ResourceList {
	t.Helper()
	if s == "" {
		return nil
	}
	out := corev1.ResourceList{}
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			t.Fatalf("bad resource %q", kv)
		}
		out[corev1.ResourceName(k)] = resource.MustParse(v)
	}
	return out
}

func ctr(t testing.TB, name, requests, limits string) corev1.Container {
	return corev1.Container{
		Name:      name,
		Resources: corev1.ResourceRequirements{Requests: rl(t, requests), Limits: rl(t, limits)},
	}
}

func sidecar(t testing.TB, name, requests, limits string) corev1.Container {
	c := ctr(t, name, requests, limits)
	always := corev1.ContainerRestartPolicyAlways
	c.RestartPolicy = &always
	return c
}

func mkPod(uid string, containers []corev1.Container, inits ...corev1.Container) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p-" + uid, Namespace: "default", UID: types.UID(uid)},
		Spec:       corev1.PodSpec{Containers: containers, InitContainers: inits},
	}
}

func u64(v uint64) *uint64 { return &v }
func i64(v int64) *int64   { return &v }

// fmtRes renders Resources for comparison ("-" for nil fields).
func fmtRes(r Resources) string {
	f := func(p any) string {
		switch v := p.(type) {
		case *uint64:
			if v != nil {
				return itoa(int64(*v))
			}
		case *int64:
			if v != nil {
				return itoa(*v)
			}
		}
		return "-"
	}
	return "shares=" + f(r.CPUShares) + " quota=" + f(r.CPUQuota) + " period=" + f(r.CPUPeriod) +
		" mem=" + f(r.Memory) + " pids=" + f(r.PidsLimit)
}

func itoa(v int64) string { return strconv.FormatInt(v, 10) }
