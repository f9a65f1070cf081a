package volumes

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"strings"
	"sync"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// fakeSources serves ConfigMaps and Secrets by namespace/name.
type fakeSources struct {
	mu         sync.Mutex
	configMaps map[string]*corev1.ConfigMap
	secrets    map[string]*corev1.Secret
	err        error // returned for everything when set
	tokenReqs  []string
}

func newFakeSources() *fakeSources {
	return &fakeSources{configMaps: map[string]*corev1.ConfigMap{}, secrets: map[string]*corev1.Secret{}}
}

func (f *fakeSources) ConfigMap(_ context.Context, ns, name string) (*corev1.ConfigMap, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return nil, f.err
	}
	if cm, ok := f.configMaps[ns+"/"+name]; ok {
		return cm.DeepCopy(), nil
	}
	return nil, apierrors.NewNotFound(corev1.Resource("configmaps"), name)
}

func (f *fakeSources) Secret(_ context.Context, ns, name string) (*corev1.Secret, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return nil, f.err
	}
	if s, ok := f.secrets[ns+"/"+name]; ok {
		return s.DeepCopy(), nil
	}
	return nil, apierrors.NewNotFound(corev1.Resource("secrets"), name)
}

// ServiceAccountToken answers with a token naming what was asked, and
// records the request.
func (f *fakeSources) ServiceAccountToken(_ context.Context, ns, sa string, spec authenticationv1.TokenRequestSpec) (*authenticationv1.TokenRequest, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return nil, f.err
	}
	req := fmt.Sprintf("%s/%s aud=%v exp=%d bound=%s/%s/%s", ns, sa, spec.Audiences, *spec.ExpirationSeconds,
		spec.BoundObjectRef.Kind, spec.BoundObjectRef.Name, spec.BoundObjectRef.UID)
	f.tokenReqs = append(f.tokenReqs, req)
	return &authenticationv1.TokenRequest{Spec: spec, Status: authenticationv1.TokenRequestStatus{Token: "jwt-for-" + sa}}, nil
}

func (f *fakeSources) setConfigMap(ns, name string, data map[string]string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.configMaps[ns+"/"+name] = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: data}
}

func (f *fakeSources) setSecret(ns, name string, data map[string]string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: map[string][]byte{}}
	for k, v := range data {
		s.Data[k] = []byte(v)
	}
	f.secrets[ns+"/"+name] = s
}

func i32(v int32) *int32 { return &v }
func ptr[T any](v T) *T  { return &v }

// flat renders a payload as path -> "content mode" for comparisons.
func flat(p map[string]FileProjection) map[string]string {
	out := map[string]string{}
	for k, v := range p {
		out[k] = string(v.Data) + " " + v.Mode.String()
	}
	return out
}

func TestKeysPayload(t *testing.T) {
	data := map[string][]byte{"a": []byte("1"), "b": []byte("2")}
	cases := []struct {
		name     string
		items    []corev1.KeyToPath
		def      int32
		optional bool
		want     map[string]string
		wantErr  string
	}{
		{name: "all keys", def: 0o644, want: map[string]string{"a": "1 -rw-r--r--", "b": "2 -rw-r--r--"}},
		{name: "defaultMode", def: 0o400, want: map[string]string{"a": "1 -r--------", "b": "2 -r--------"}},
		{name: "items with paths and a mode", def: 0o644,
			items: []corev1.KeyToPath{{Key: "a", Path: "x/a.txt"}, {Key: "b", Path: "b", Mode: i32(0o600)}},
			want:  map[string]string{"x/a.txt": "1 -rw-r--r--", "b": "2 -rw-------"}},
		{name: "missing key", def: 0o644, items: []corev1.KeyToPath{{Key: "nope", Path: "n"}},
			wantErr: `configMap c references non-existent key "nope"`},
		{name: "missing key optional", def: 0o644, optional: true,
			items: []corev1.KeyToPath{{Key: "nope", Path: "n"}, {Key: "a", Path: "a"}},
			want:  map[string]string{"a": "1 -rw-r--r--"}},
		{name: "bad defaultMode", def: 0o1777, wantErr: "defaultMode"},
		{name: "bad item mode", def: 0o644, items: []corev1.KeyToPath{{Key: "a", Path: "a", Mode: i32(-1)}}, wantErr: "mode of key"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := KeysPayload("configMap c", data, c.items, c.def, c.optional)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("err = %v, want %q", err, c.wantErr)
				}
				return
			}
			if err != nil || !maps.Equal(flat(got), c.want) {
				t.Fatalf("KeysPayload = %v, %v; want %v", flat(got), err, c.want)
			}
		})
	}
}

func TestConfigMapAndSecretSources(t *testing.T) {
	ctx := context.Background()
	src := newFakeSources()
	src.setConfigMap("ns", "cm", map[string]string{"k": "v"})
	// Missing and not optional: the not-found error, still recognizable.
	_, err := configMapPayload(ctx, src, "ns", &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "gone"}})
	if !apierrors.IsNotFound(err) || !strings.Contains(err.Error(), "ns/gone") {
		t.Fatalf("missing configMap: err = %v, want a not-found naming ns/gone", err)
	}
	// Missing and optional: an empty payload.
	got, err := secretPayload(ctx, src, "ns", &corev1.SecretVolumeSource{SecretName: "gone", Optional: ptr(true)})
	if err != nil || len(got) != 0 {
		t.Fatalf("optional missing secret = %v, %v; want empty", got, err)
	}
	// Other errors fail even optional volumes.
	src.err = errors.New("apiserver down")
	if _, err := configMapPayload(ctx, src, "ns", &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cm"}, Optional: ptr(true)}); err == nil {
		t.Fatal("an API failure was taken for an optional missing object")
	}
	src.err = nil
	if _, err := configMapPayload(ctx, nil, "ns", &corev1.ConfigMapVolumeSource{}); !errors.Is(err, errNoSources) {
		t.Fatalf("no Sources: err = %v", err)
	}
	cm, err := configMapPayload(ctx, src, "ns", &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cm"}})
	if err != nil || string(cm["k"].Data) != "v" || cm["k"].Mode != 0o644 {
		t.Fatalf("configMap payload = %v, %v", flat(cm), err)
	}
}

func downwardPod() *corev1.Pod {
	pod := testPod("uid-dw")
	pod.Labels = map[string]string{"app": "web", "tier": "front\"end"}
	pod.Annotations = map[string]string{"note": "a\nb"}
	pod.Spec.NodeName = "node-1"
	pod.Spec.ServiceAccountName = "sa"
	pod.Status.PodIP, pod.Status.HostIP = "10.0.0.5", "192.168.1.2"
	pod.Spec.Containers[0].Resources = corev1.ResourceRequirements{
		Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1500m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m"), corev1.ResourceMemory: resource.MustParse("32Mi"),
			corev1.ResourceEphemeralStorage: resource.MustParse("1Gi")},
	}
	pod.Spec.InitContainers = []corev1.Container{{Name: "init"}}
	return pod
}

func TestDownwardAPIValues(t *testing.T) {
	allocatable := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("8Gi"),
		corev1.ResourceEphemeralStorage: resource.MustParse("100Gi")}
	field := func(p string) corev1.DownwardAPIVolumeFile {
		return corev1.DownwardAPIVolumeFile{Path: "f", FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: p}}
	}
	res := func(c, r, div string) corev1.DownwardAPIVolumeFile {
		f := corev1.DownwardAPIVolumeFile{Path: "f", ResourceFieldRef: &corev1.ResourceFieldSelector{ContainerName: c, Resource: r}}
		if div != "" {
			f.ResourceFieldRef.Divisor = resource.MustParse(div)
		}
		return f
	}
	cases := []struct {
		item    corev1.DownwardAPIVolumeFile
		want    string
		wantErr string
	}{
		{field("metadata.name"), "p", ""},
		{field("metadata.namespace"), "ns", ""},
		{field("metadata.uid"), "uid-dw", ""},
		{field("metadata.labels"), "app=\"web\"\ntier=\"front\\\"end\"", ""},
		{field("metadata.annotations"), "note=\"a\\nb\"", ""},
		{field("metadata.labels['app']"), "web", ""},
		{field("metadata.annotations['missing']"), "", ""},
		{field("spec.nodeName"), "node-1", ""},
		{field("spec.serviceAccountName"), "sa", ""},
		{field("status.podIP"), "10.0.0.5", ""},
		{field("status.hostIP"), "192.168.1.2", ""},
		{field("spec.containers"), "", "unsupported fieldPath"},
		{field("spec.x['y']"), "", "unsupported fieldPath"},
		{corev1.DownwardAPIVolumeFile{Path: "f", FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v2", FieldPath: "metadata.name"}}, "", "apiVersion"},
		{res("c", "limits.cpu", ""), "2", ""}, // 1.5 rounded up
		{res("c", "limits.cpu", "1m"), "1500", ""},
		{res("c", "requests.cpu", "1m"), "250", ""},
		{res("c", "limits.memory", "1Mi"), "64", ""},
		{res("c", "requests.memory", ""), "33554432", ""},
		{res("c", "requests.ephemeral-storage", "1Gi"), "1", ""},
		{res("c", "limits.ephemeral-storage", "1Gi"), "100", ""}, // from allocatable
		{res("init", "limits.memory", "1Gi"), "8", ""},           // from allocatable
		{res("init", "limits.cpu", "1m"), "4000", ""},
		{res("init", "requests.cpu", ""), "0", ""},
		{res("init", "limits.hugepages-2Mi", ""), "0", ""},
		{res("", "limits.cpu", ""), "", "containerName is required"},
		{res("nope", "limits.cpu", ""), "", `container "nope" not found`},
		{res("c", "limits.gpu", ""), "", "unsupported container resource"},
		{res("c", "cpu", ""), "", "unsupported container resource"},
		{corev1.DownwardAPIVolumeFile{Path: "f"}, "", "neither fieldRef nor resourceFieldRef"},
	}
	pod := downwardPod()
	for _, c := range cases {
		got, err := DownwardAPIPayload(pod, []corev1.DownwardAPIVolumeFile{c.item}, 0o644, allocatable)
		name := "resourceFieldRef"
		if c.item.FieldRef != nil {
			name = c.item.FieldRef.FieldPath
		} else if c.item.ResourceFieldRef != nil {
			name = c.item.ResourceFieldRef.ContainerName + " " + c.item.ResourceFieldRef.Resource
		}
		if c.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("%s: err = %v, want %q", name, err, c.wantErr)
			}
			continue
		}
		if err != nil || string(got["f"].Data) != c.want {
			t.Errorf("%s = %q, %v; want %q", name, got["f"].Data, err, c.want)
		}
	}
	// Without an allocatable fallback an unset limit reads 0.
	got, err := DownwardAPIPayload(pod, []corev1.DownwardAPIVolumeFile{res("init", "limits.memory", "")}, 0o644, nil)
	if err != nil || string(got["f"].Data) != "0" {
		t.Errorf("limit without allocatable = %q, %v", got["f"].Data, err)
	}
}

func TestDownwardAPIModesAndErrors(t *testing.T) {
	pod := downwardPod()
	items := []corev1.DownwardAPIVolumeFile{
		{Path: "name", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}},
		{Path: "meta/labels", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.labels"}, Mode: i32(0o600)},
	}
	got, err := DownwardAPIPayload(pod, items, 0o444, nil)
	want := map[string]string{"name": "p " + os.FileMode(0o444).String(), "meta/labels": "app=\"web\"\ntier=\"front\\\"end\" " + os.FileMode(0o600).String()}
	if err != nil || !maps.Equal(flat(got), want) {
		t.Fatalf("payload = %v, %v; want %v", flat(got), err, want)
	}
	// All errors reported, not just the first.
	items = append(items,
		corev1.DownwardAPIVolumeFile{Path: "x", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "bogus"}},
		corev1.DownwardAPIVolumeFile{Path: "y", ResourceFieldRef: &corev1.ResourceFieldSelector{Resource: "limits.cpu"}})
	_, err = DownwardAPIPayload(pod, items, 0o644, nil)
	if err == nil || !strings.Contains(err.Error(), `item "x"`) || !strings.Contains(err.Error(), `item "y"`) {
		t.Fatalf("err = %v, want both bad items named", err)
	}
}

func TestProjectedPayload(t *testing.T) {
	ctx := context.Background()
	src := newFakeSources()
	src.setConfigMap("ns", "cm", map[string]string{"a": "1", "b": "2"})
	src.setSecret("ns", "s", map[string]string{"token": "t"})
	pod := downwardPod()
	vol := &corev1.ProjectedVolumeSource{DefaultMode: i32(0o440), Sources: []corev1.VolumeProjection{
		{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "cm"},
			Items: []corev1.KeyToPath{{Key: "a", Path: "cfg/a"}}}},
		{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "s"}}},
		{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "gone"}, Optional: ptr(true)}},
		{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{
			{Path: "labels", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.labels['app']"}, Mode: i32(0o400)}}}},
	}}
	got, err := projectedPayload(ctx, src, pod, vol, nil)
	want := map[string]string{"cfg/a": "1 -r--r-----", "token": "t -r--r-----", "labels": "web -r--------"}
	if err != nil || !maps.Equal(flat(got), want) {
		t.Fatalf("projected = %v, %v; want %v", flat(got), err, want)
	}

	// A serviceAccountToken source: a token of the pod's account, bound to
	// the pod, for the audience and lifetime asked.
	tokenVol := &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{
		Path: "sa/token", Audience: "vault", ExpirationSeconds: ptr(int64(7200))}}}}
	pod.Spec.ServiceAccountName = "robot"
	got, err = projectedPayload(ctx, src, pod, tokenVol, nil)
	if err != nil || !maps.Equal(flat(got), map[string]string{"sa/token": "jwt-for-robot -rw-r--r--"}) {
		t.Fatalf("serviceAccountToken = %v, %v", flat(got), err)
	}
	if want := fmt.Sprintf("%s/robot aud=[vault] exp=7200 bound=Pod/%s/%s", pod.Namespace, pod.Name, pod.UID); len(src.tokenReqs) != 1 || src.tokenReqs[0] != want {
		t.Fatalf("token requests %q, want %q", src.tokenReqs, want)
	}

	vol.Sources = append(vol.Sources,
		corev1.VolumeProjection{ClusterTrustBundle: &corev1.ClusterTrustBundleProjection{Path: "ca"}},
		corev1.VolumeProjection{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "gone"}}})
	_, err = projectedPayload(ctx, src, pod, vol, nil)
	var ue *UnsupportedError
	if !errors.As(err, &ue) || ue.Type != "projected clusterTrustBundle" || !errors.Is(err, ErrUnsupported) {
		t.Fatalf("err = %v, want an UnsupportedError for the clusterTrustBundle source", err)
	}
	if !strings.Contains(err.Error(), "cluster trust bundles are not served by this cluster yet") || !apierrors.IsNotFound(err) {
		t.Fatalf("err = %v, want the bundle's reason and the missing configMap", err)
	}
	vol.Sources = []corev1.VolumeProjection{{ClusterTrustBundle: &corev1.ClusterTrustBundleProjection{Path: "ca"}}}
	if _, err := projectedPayload(ctx, src, pod, vol, nil); !errors.As(err, &ue) || ue.Type != "projected clusterTrustBundle" {
		t.Fatalf("clusterTrustBundle: err = %v", err)
	}
}
