package runtime

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestExpand(t *testing.T) {
	vars := map[string]string{"A": "a", "EMPTY": "", "B": "$(A)"}
	tests := []struct{ in, want string }{
		{"", ""},
		{"plain", "plain"},
		{"$(A)", "a"},
		{"x$(A)y$(A)", "xaya"},
		{"$(EMPTY)", ""},
		{"$(B)", "$(A)"}, // no recursive expansion
		{"$(MISSING)", "$(MISSING)"},
		{"$$(A)", "$(A)"}, // escaped
		{"$$$(A)", "$a"},
		{"$$", "$"},
		{"$", "$"},
		{"a$", "a$"},
		{"$(A", "$(A"}, // unterminated
		{"$A", "$A"},
		{"$()", "$()"}, // an empty name is unknown like any other
		{"100$", "100$"},
	}
	for _, tt := range tests {
		if got := Expand(tt.in, MappingFor(vars)); got != tt.want {
			t.Errorf("Expand(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestProcessArgs(t *testing.T) {
	img := ImageConfig{Entrypoint: []string{"/entry"}, Cmd: []string{"cmd", "arg"}}
	tests := []struct {
		name          string
		command, args []string
		img           ImageConfig
		want          []string
		err           error
	}{
		{"image defaults", nil, nil, img, []string{"/entry", "cmd", "arg"}, nil},
		{"args replace cmd", nil, []string{"x"}, img, []string{"/entry", "x"}, nil},
		{"command drops entrypoint and cmd", []string{"/bin/sh"}, nil, img, []string{"/bin/sh"}, nil},
		{"command and args", []string{"/bin/sh"}, []string{"-c", "true"}, img, []string{"/bin/sh", "-c", "true"}, nil},
		{"cmd only image", nil, nil, ImageConfig{Cmd: []string{"/pause"}}, []string{"/pause"}, nil},
		{"empty-string entrypoint ignored", nil, nil, ImageConfig{Entrypoint: []string{""}, Cmd: []string{"c"}}, []string{"c"}, nil},
		{"nothing", nil, nil, ImageConfig{}, nil, ErrNoCommand},
	}
	for _, tt := range tests {
		got, err := processArgs(tt.command, tt.args, tt.img)
		if !errors.Is(err, tt.err) || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s: got %q, %v; want %q, %v", tt.name, got, err, tt.want, tt.err)
		}
	}
}

func envPod() *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: "web", Namespace: "prod", UID: "uid-1",
			Labels:      map[string]string{"app": "web", "tier": "front"},
			Annotations: map[string]string{"note": "hi"},
		},
		Spec: corev1.PodSpec{NodeName: "n1", ServiceAccountName: "sa"},
	}
}

func fieldEnv(name, path string) corev1.EnvVar {
	return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: path}}}
}

func TestContainerEnv(t *testing.T) {
	yes := true
	src := EnvObjects{
		ConfigMaps: map[string]*corev1.ConfigMap{
			"cfg": {Data: map[string]string{"LEVEL": "debug", "b": "2", "bad=key": "x"}},
		},
		Secrets: map[string]*corev1.Secret{
			"sec": {Data: map[string][]byte{"PASS": []byte("s3cret")}},
		},
	}
	ec := EnvContext{PodIPs: []string{"10.1.0.5", "fd00::5"}, HostIPs: []string{"192.0.2.1"}, Objects: src,
		Allocatable: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("8Gi"), corev1.ResourceCPU: resource.MustParse("2")}}
	resRef := func(name, res, div string) corev1.EnvVar {
		ref := &corev1.ResourceFieldSelector{Resource: res}
		if div != "" {
			ref.Divisor = resource.MustParse(div)
		}
		return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: ref}}
	}
	tests := []struct {
		name    string
		c       corev1.Container
		want    []string
		wantErr string
	}{
		{"plain and expansion", corev1.Container{Env: []corev1.EnvVar{
			{Name: "A", Value: "x"}, {Name: "B", Value: "$(A)-$(C)-$$(A)"}, {Name: "C", Value: "late"}, {Name: "A", Value: "y"},
		}}, []string{"A=y", "B=x-$(C)-$(A)", "C=late"}, ""},
		{"field refs", corev1.Container{Env: []corev1.EnvVar{
			fieldEnv("N", "metadata.name"), fieldEnv("NS", "metadata.namespace"), fieldEnv("U", "metadata.uid"),
			fieldEnv("L", "metadata.labels['app']"), fieldEnv("AN", "metadata.annotations['note']"),
			fieldEnv("NODE", "spec.nodeName"), fieldEnv("SA", "spec.serviceAccountName"),
			fieldEnv("IP", "status.podIP"), fieldEnv("IPS", "status.podIPs"),
			fieldEnv("HIP", "status.hostIP"), fieldEnv("HIPS", "status.hostIPs"),
			fieldEnv("LS", "metadata.labels"),
		}}, []string{"N=web", "NS=prod", "U=uid-1", "L=web", "AN=hi", "NODE=n1", "SA=sa",
			"IP=10.1.0.5", "IPS=10.1.0.5,fd00::5", "HIP=192.0.2.1", "HIPS=192.0.2.1", "LS=app=\"web\"\ntier=\"front\""}, ""},
		{"bad field", corev1.Container{Env: []corev1.EnvVar{fieldEnv("X", "spec.nope")}}, nil, "unsupported fieldPath"},
		{"resource refs", corev1.Container{
			Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
				Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1500m")},
			},
			Env: []corev1.EnvVar{
				resRef("RC", "requests.cpu", ""), resRef("RCM", "requests.cpu", "1m"), resRef("LC", "limits.cpu", ""),
				resRef("RM", "requests.memory", "1Mi"), resRef("LM", "limits.memory", "1Gi"),
			}}, []string{"RC=1", "RCM=250", "LC=2", "RM=64", "LM=8"}, ""},
		{"configmap and secret keys", corev1.Container{Env: []corev1.EnvVar{
			{Name: "L", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}, Key: "LEVEL"}}},
			{Name: "P", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "sec"}, Key: "PASS"}}},
			{Name: "O1", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "missing"}, Key: "k", Optional: &yes}}},
			{Name: "O2", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}, Key: "nokey", Optional: &yes}}},
			{Name: "O3", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "nosec"}, Key: "k", Optional: &yes}}},
		}}, []string{"L=debug", "P=s3cret"}, ""},
		{"missing configmap", corev1.Container{Env: []corev1.EnvVar{
			{Name: "L", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "missing"}, Key: "k"}}},
		}}, nil, "not found"},
		{"missing key", corev1.Container{Env: []corev1.EnvVar{
			{Name: "L", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}, Key: "nokey"}}},
		}}, nil, "couldn't find key nokey in ConfigMap prod/cfg"},
		{"missing secret", corev1.Container{Env: []corev1.EnvVar{
			{Name: "P", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "nosec"}, Key: "k"}}},
		}}, nil, "not found"},
		{"envFrom with prefix, then env overrides and expands", corev1.Container{
			EnvFrom: []corev1.EnvFromSource{
				{Prefix: "CFG_", ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}}},
				{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "sec"}}},
				{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "gone"}, Optional: &yes}},
			},
			Env: []corev1.EnvVar{{Name: "CFG_b", Value: "over"}, {Name: "X", Value: "$(PASS)"}},
		}, []string{"CFG_LEVEL=debug", "CFG_b=over", "PASS=s3cret", "X=s3cret"}, ""},
		{"envFrom missing", corev1.Container{EnvFrom: []corev1.EnvFromSource{
			{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "gone"}}},
		}}, nil, "not found"},
	}
	for _, tt := range tests {
		c := tt.c
		c.Name = "app"
		got, err := ContainerEnv(envPod(), &c, ec)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("%s: err %v, want %q", tt.name, err, tt.wantErr)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s:\n got %q, %v\nwant %q", tt.name, got, err, tt.want)
		}
	}
}

func TestEnvReferences(t *testing.T) {
	yes := true
	c := &corev1.Container{Name: "app",
		EnvFrom: []corev1.EnvFromSource{
			{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "a"}}},
			{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "s"}}},
		},
		Env: []corev1.EnvVar{
			{Name: "X", Value: "plain"},
			{Name: "L", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "b"}, Key: "k", Optional: &yes}}},
			{Name: "M", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "a"}, Key: "k"}}},
			{Name: "P", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "t"}, Key: "k"}}},
		},
	}
	cms, secs := EnvReferences(c)
	if !reflect.DeepEqual(cms, []string{"a", "b"}) || !reflect.DeepEqual(secs, []string{"s", "t"}) {
		t.Fatalf("EnvReferences = %v, %v", cms, secs)
	}
	// A missing object is "not found": an optional reference skips it, a
	// required one is an error.
	opt := &corev1.Container{Name: "app", Env: c.Env[1:2]}
	if env, err := ContainerEnv(envPod(), opt, EnvContext{}); err != nil || len(env) != 0 {
		t.Fatalf("optional missing: %v, %v", env, err)
	}
	req := &corev1.Container{Name: "app", Env: c.Env[2:3]}
	if _, err := ContainerEnv(envPod(), req, EnvContext{}); err == nil {
		t.Fatal("required missing: want an error")
	}
}

func TestPodFieldValueHostNetwork(t *testing.T) {
	pod := envPod()
	pod.Spec.HostNetwork = true
	got, err := PodFieldValue(pod, "status.podIP", nil, []string{"192.0.2.1"})
	if err != nil || got != "192.0.2.1" {
		t.Fatalf("podIP of host-network pod = %q, %v", got, err)
	}
}

func TestExpandCommand(t *testing.T) {
	c := &corev1.Container{Command: []string{"/bin/$(SH)"}, Args: []string{"-c", "echo $(MSG) $$(MSG) $(NOPE)"}}
	cmd, args := ExpandCommand(c, []string{"SH=sh", "MSG=hello=world"})
	if !reflect.DeepEqual(cmd, []string{"/bin/sh"}) || !reflect.DeepEqual(args, []string{"-c", "echo hello=world $(MSG) $(NOPE)"}) {
		t.Fatalf("got %q %q", cmd, args)
	}
}
