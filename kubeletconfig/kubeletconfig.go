// Package kubeletconfig reads a kubelet configuration file (apiVersion
// kubelet.config.k8s.io/v1beta1, kind KubeletConfiguration, upstream's own
// types) and turns the settings the nodelet shares with the kubelet into
// the command-line flags that carry them, so that a file and the flags go
// through the same parsing and checks, and operators can reuse the files
// they already have.
package kubeletconfig

import (
	"fmt"
	"os"
	"sort"

	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
)

const (
	APIVersion = "kubelet.config.k8s.io/v1beta1"
	Kind       = "KubeletConfiguration"
)

// File is a decoded configuration file.
type File struct {
	Path   string
	Config kubeletv1beta1.KubeletConfiguration
	// Ignored are the fields the file sets that the nodelet does not
	// implement (yet): memorySwap, featureGates and the rest.
	// They are accepted, so that upstream files work, and the caller
	// warns about each.
	Ignored []string
}

// Load reads and decodes path strictly: an unknown or duplicate field, or
// a field whose case differs from upstream's, is an error naming it.
func Load(path string) (*File, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read kubelet config %s: %w", path, err)
	}
	f, err := Decode(data)
	if err != nil {
		return nil, fmt.Errorf("kubelet config %s: %w", path, err)
	}
	f.Path = path
	return f, nil
}

// Decode decodes a KubeletConfiguration in YAML or JSON.
func Decode(data []byte) (*File, error) {
	js, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		return nil, fmt.Errorf("parse: %w", err)
	}
	f := &File{}
	strict, err := kjson.UnmarshalStrict(js, &f.Config, kjson.DisallowDuplicateFields, kjson.DisallowUnknownFields)
	if err != nil {
		return nil, fmt.Errorf("decode: %w", err)
	}
	if len(strict) > 0 {
		return nil, fmt.Errorf("decode: %w", strict[0]) // e.g. json: unknown field "maxPod"
	}
	if f.Config.APIVersion != APIVersion || f.Config.Kind != Kind {
		return nil, fmt.Errorf("apiVersion %q, kind %q: want %s %s", f.Config.APIVersion, f.Config.Kind, APIVersion, Kind)
	}
	if f.Ignored, err = ignoredFields(js); err != nil {
		return nil, err
	}
	return f, nil
}

// ignoredFields lists the top-level fields set in the file (non-null)
// that the nodelet does not map, and authentication.x509's fields other
// than clientCAFile.
func ignoredFields(js []byte) ([]string, error) {
	var raw map[string]any
	if err := kjson.UnmarshalCaseSensitivePreserveInts(js, &raw); err != nil {
		return nil, fmt.Errorf("decode: %w", err)
	}
	var out []string
	for k, v := range raw {
		switch {
		case v == nil || k == "apiVersion" || k == "kind":
		case k == "authentication":
			out = append(out, ignoredAuthentication(v)...)
		case !isMapped(k):
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out, nil
}

func ignoredAuthentication(v any) []string {
	auth, _ := v.(map[string]any)
	x509, _ := auth["x509"].(map[string]any)
	var out []string
	for k, v := range x509 {
		if k != "clientCAFile" && v != nil {
			out = append(out, "authentication.x509."+k)
		}
	}
	return out
}
