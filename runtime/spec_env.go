package runtime

// Environment variables of a container as upstream's kubelet builds them
// (makeEnvironmentVariables): envFrom first, then env in order, with $(VAR)
// references to earlier variables expanded; then command and args expanded
// with the result.

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/nodelet/nodelet/fieldpath"
)

// ErrContainerConfig marks a container whose configuration cannot be
// built from the API's objects (a missing ConfigMap, Secret or key): the
// kubelet's CreateContainerConfigError.
var ErrContainerConfig = errors.New("container configuration")

// EnvObjects are the ConfigMaps and Secrets of the pod's namespace that a
// container's env and envFrom refer to (EnvReferences names them), fetched
// by the caller before the spec is built, so that building it stays a pure
// function. A name missing from a map is an object that does not exist.
type EnvObjects struct {
	ConfigMaps map[string]*corev1.ConfigMap
	Secrets    map[string]*corev1.Secret
}

// EnvReferences lists the ConfigMaps and Secrets a container's env and
// envFrom refer to, each once.
func EnvReferences(c *corev1.Container) (configMaps, secrets []string) {
	add := func(list *[]string, name string) {
		if name != "" && !slices.Contains(*list, name) {
			*list = append(*list, name)
		}
	}
	for _, from := range c.EnvFrom {
		if from.ConfigMapRef != nil {
			add(&configMaps, from.ConfigMapRef.Name)
		}
		if from.SecretRef != nil {
			add(&secrets, from.SecretRef.Name)
		}
	}
	for _, v := range c.Env {
		if v.ValueFrom != nil && v.ValueFrom.ConfigMapKeyRef != nil {
			add(&configMaps, v.ValueFrom.ConfigMapKeyRef.Name)
		}
		if v.ValueFrom != nil && v.ValueFrom.SecretKeyRef != nil {
			add(&secrets, v.ValueFrom.SecretKeyRef.Name)
		}
	}
	return configMaps, secrets
}

// EnvContext is what the environment of a container depends on besides the
// pod spec.
type EnvContext struct {
	PodIPs  []string // the sandbox's IPs (the host's for host-network pods)
	HostIPs []string // the node's IPs
	// Allocatable stands in for a limit the container does not set, in
	// resourceFieldRef (as upstream: the node's allocatable).
	Allocatable corev1.ResourceList
	Objects     EnvObjects
	// Services is the service environment (ServiceEnv of PodServices):
	// $(VAR) references may use it, and it is added after the
	// container's own variables, which win.
	Services map[string]string
}

// envList keeps variables in first-definition order with later values
// replacing earlier ones, and a map for $(VAR) lookups.
type envList struct {
	names  []string
	values map[string]string
}

func (l *envList) set(name, value string) {
	if _, ok := l.values[name]; !ok {
		l.names = append(l.names, name)
	}
	l.values[name] = value
}

func (l *envList) slice() []string {
	out := make([]string, 0, len(l.names))
	for _, n := range l.names {
		out = append(out, n+"="+l.values[n])
	}
	return out
}

// ContainerEnv returns the container's environment as NAME=value entries
// (without the image's: the spec merges those underneath). Env values are
// expanded against the variables defined before them; valueFrom results
// are not.
func ContainerEnv(pod *corev1.Pod, c *corev1.Container, ec EnvContext) ([]string, error) {
	env := &envList{values: map[string]string{}}
	cache := &sourceCache{ns: pod.Namespace, objs: ec.Objects}
	for _, from := range c.EnvFrom {
		if err := addEnvFrom(env, cache, from); err != nil {
			return nil, fmt.Errorf("envFrom of container %s: %w", c.Name, err)
		}
	}
	for _, v := range c.Env {
		if v.ValueFrom == nil {
			env.set(v.Name, Expand(v.Value, MappingFor(env.values, ec.Services)))
			continue
		}
		val, ok, err := envValueFrom(pod, c, v.ValueFrom, cache, ec)
		if err != nil {
			return nil, fmt.Errorf("env %s of container %s: %w", v.Name, c.Name, err)
		}
		if ok {
			env.set(v.Name, val)
		}
	}
	names := make([]string, 0, len(ec.Services))
	for name := range ec.Services {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if _, ok := env.values[name]; !ok {
			env.set(name, ec.Services[name])
		}
	}
	return env.slice(), nil
}

func addEnvFrom(env *envList, cache *sourceCache, from corev1.EnvFromSource) error {
	var data map[string]string
	switch {
	case from.ConfigMapRef != nil:
		cm, err := cache.configMap(from.ConfigMapRef.Name)
		if err != nil {
			if isNotFound(err) && isTrue(from.ConfigMapRef.Optional) {
				return nil
			}
			return err
		}
		data = cm.Data
	case from.SecretRef != nil:
		s, err := cache.secret(from.SecretRef.Name)
		if err != nil {
			if isNotFound(err) && isTrue(from.SecretRef.Optional) {
				return nil
			}
			return err
		}
		data = make(map[string]string, len(s.Data)+len(s.StringData))
		for k, v := range s.StringData {
			data[k] = v
		}
		for k, v := range s.Data {
			data[k] = string(v)
		}
	}
	keys := make([]string, 0, len(data))
	for k := range data {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		name := from.Prefix + k
		if name == "" || strings.Contains(name, "=") {
			continue // not a usable variable name
		}
		env.set(name, data[k])
	}
	return nil
}

// envValueFrom resolves one valueFrom; ok is false for an optional
// reference whose object or key is missing.
func envValueFrom(pod *corev1.Pod, c *corev1.Container, from *corev1.EnvVarSource, cache *sourceCache, ec EnvContext) (string, bool, error) {
	switch {
	case from.FieldRef != nil:
		v, err := PodFieldValue(pod, from.FieldRef.FieldPath, ec.PodIPs, ec.HostIPs)
		return v, err == nil, err
	case from.ResourceFieldRef != nil:
		v, err := fieldpath.ContainerResource(pod, c, from.ResourceFieldRef, ec.Allocatable)
		return v, err == nil, err
	case from.ConfigMapKeyRef != nil:
		ref := from.ConfigMapKeyRef
		cm, err := cache.configMap(ref.Name)
		if err != nil {
			if isNotFound(err) && isTrue(ref.Optional) {
				return "", false, nil
			}
			return "", false, err
		}
		if v, ok := cm.Data[ref.Key]; ok {
			return v, true, nil
		}
		if isTrue(ref.Optional) {
			return "", false, nil
		}
		return "", false, fmt.Errorf("couldn't find key %s in ConfigMap %s/%s", ref.Key, pod.Namespace, ref.Name)
	case from.SecretKeyRef != nil:
		ref := from.SecretKeyRef
		s, err := cache.secret(ref.Name)
		if err != nil {
			if isNotFound(err) && isTrue(ref.Optional) {
				return "", false, nil
			}
			return "", false, err
		}
		if v, ok := s.Data[ref.Key]; ok {
			return string(v), true, nil
		}
		if v, ok := s.StringData[ref.Key]; ok {
			return v, true, nil
		}
		if isTrue(ref.Optional) {
			return "", false, nil
		}
		return "", false, fmt.Errorf("couldn't find key %s in Secret %s/%s", ref.Key, pod.Namespace, ref.Name)
	}
	return "", false, errors.New("valueFrom names no source")
}

// sourceCache looks up the objects the caller fetched; a missing one is a
// not-found error, as the API would answer.
type sourceCache struct {
	ns   string
	objs EnvObjects
}

func (c *sourceCache) configMap(name string) (*corev1.ConfigMap, error) {
	if cm := c.objs.ConfigMaps[name]; cm != nil {
		return cm, nil
	}
	return nil, fmt.Errorf("get configmap %s/%s: %w", c.ns, name, apierrors.NewNotFound(corev1.Resource("configmaps"), name))
}

func (c *sourceCache) secret(name string) (*corev1.Secret, error) {
	if s := c.objs.Secrets[name]; s != nil {
		return s, nil
	}
	return nil, fmt.Errorf("get secret %s/%s: %w", c.ns, name, apierrors.NewNotFound(corev1.Resource("secrets"), name))
}

func isNotFound(err error) bool { return apierrors.IsNotFound(err) }

func isTrue(b *bool) bool { return b != nil && *b }

// PodFieldValue resolves a downward-API fieldRef path for env
// (fieldpath.PodField); a host-network pod's IPs are the node's.
func PodFieldValue(pod *corev1.Pod, fieldPath string, podIPs, hostIPs []string) (string, error) {
	if pod.Spec.HostNetwork && len(podIPs) == 0 {
		podIPs = hostIPs
	}
	return fieldpath.PodField(pod, fieldPath, podIPs, hostIPs)
}

// MappingFor returns a $(VAR) lookup over the given maps, first match wins;
// an unknown name expands to itself, $(NAME), as upstream.
func MappingFor(maps ...map[string]string) func(string) string {
	return func(name string) string {
		for _, m := range maps {
			if v, ok := m[name]; ok {
				return v
			}
		}
		return "$(" + name + ")"
	}
}

// Expand replaces $(VAR) references in s using mapping; $$ is an escaped $,
// and an unterminated $( is kept as is (upstream's expansion package).
func Expand(s string, mapping func(string) string) string {
	var b strings.Builder
	checkpoint := 0
	for cursor := 0; cursor < len(s); cursor++ {
		if s[cursor] != '$' || cursor+1 >= len(s) {
			continue
		}
		b.WriteString(s[checkpoint:cursor])
		read, isVar, advance := readVariable(s[cursor+1:])
		if isVar {
			b.WriteString(mapping(read))
		} else {
			b.WriteString(read)
		}
		cursor += advance
		checkpoint = cursor + 1
	}
	return b.String() + s[checkpoint:]
}

func readVariable(s string) (string, bool, int) {
	switch s[0] {
	case '$':
		return "$", false, 1
	case '(':
		for i := 1; i < len(s); i++ {
			if s[i] == ')' {
				return s[1:i], true, i + 1
			}
		}
		return "$(", false, 1
	default:
		return "$" + s[:1], false, 1
	}
}

// ExpandCommand expands $(VAR) references in a container's command and
// args with its environment (as returned by ContainerEnv).
func ExpandCommand(c *corev1.Container, env []string) (command, args []string) {
	vars := make(map[string]string, len(env))
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		vars[k] = v
	}
	mapping := MappingFor(vars)
	for _, s := range c.Command {
		command = append(command, Expand(s, mapping))
	}
	for _, s := range c.Args {
		args = append(args, Expand(s, mapping))
	}
	return command, args
}
