package registry

import (
	"math"
	"net"
	"reflect"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// DNS limits of a pod's dnsConfig (upstream's MaxDNSNameservers and friends).
const (
	maxDNSNameservers = 3
	maxDNSSearchPaths = 32
	maxDNSSearchChars = 2048
)

// validatePodSpec validates a pod spec, in a pod or in a template, the way
// upstream's ValidatePodSpec does for the fields nodelet supports. It expects
// defaults to have been applied (an empty restartPolicy is an error).
func validatePodSpec(spec *corev1.PodSpec, path *field.Path) field.ErrorList {
	vols, errs := validateVolumes(spec.Volumes, path.Child("volumes"))
	errs = append(errs, validateContainers(spec, vols, path)...)
	errs = append(errs, validateRestartPolicy(spec.RestartPolicy, path.Child("restartPolicy"))...)
	errs = append(errs, validateDNSPolicy(spec.DNSPolicy, path.Child("dnsPolicy"))...)
	errs = append(errs, validateDNSConfig(spec.DNSConfig, spec.DNSPolicy, path.Child("dnsConfig"))...)
	errs = append(errs, metav1validation.ValidateLabels(spec.NodeSelector, path.Child("nodeSelector"))...)
	errs = append(errs, validateTolerations(spec.Tolerations, path.Child("tolerations"))...)
	errs = append(errs, validatePodSpecNames(spec, path)...)
	if spec.ActiveDeadlineSeconds != nil {
		if v := *spec.ActiveDeadlineSeconds; v < 1 || v > math.MaxInt32 {
			errs = append(errs, field.Invalid(path.Child("activeDeadlineSeconds"), v, validation.InclusiveRangeError(1, math.MaxInt32)))
		}
	}
	if spec.TerminationGracePeriodSeconds != nil {
		errs = append(errs, nonNegative(*spec.TerminationGracePeriodSeconds, path.Child("terminationGracePeriodSeconds"))...)
	}
	for i, g := range spec.ReadinessGates {
		errs = append(errs, qualifiedName(string(g.ConditionType), path.Child("readinessGates").Index(i).Child("conditionType"))...)
	}
	for i, s := range spec.ImagePullSecrets {
		if s.Name == "" {
			errs = append(errs, field.Required(path.Child("imagePullSecrets").Index(i).Child("name"), ""))
		}
	}
	return errs
}

// validatePodSpecNames checks the fields that name other objects or DNS names.
func validatePodSpecNames(spec *corev1.PodSpec, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	subdomains := []struct {
		value string
		name  string
	}{
		{spec.ServiceAccountName, "serviceAccountName"},
		{spec.NodeName, "nodeName"},
		{spec.PriorityClassName, "priorityClassName"},
	}
	for _, s := range subdomains {
		if s.value != "" {
			errs = append(errs, dns1123Subdomain(s.value, path.Child(s.name))...)
		}
	}
	if spec.Hostname != "" {
		errs = append(errs, dns1123Label(spec.Hostname, path.Child("hostname"))...)
	}
	if spec.Subdomain != "" {
		errs = append(errs, dns1123Label(spec.Subdomain, path.Child("subdomain"))...)
	}
	if spec.PreemptionPolicy != nil {
		switch *spec.PreemptionPolicy {
		case corev1.PreemptLowerPriority, corev1.PreemptNever:
		default:
			errs = append(errs, field.NotSupported(path.Child("preemptionPolicy"), *spec.PreemptionPolicy,
				[]corev1.PreemptionPolicy{corev1.PreemptLowerPriority, corev1.PreemptNever}))
		}
	}
	return errs
}

func validateRestartPolicy(p corev1.RestartPolicy, path *field.Path) field.ErrorList {
	switch p {
	case corev1.RestartPolicyAlways, corev1.RestartPolicyOnFailure, corev1.RestartPolicyNever:
		return nil
	case "":
		return field.ErrorList{field.Required(path, "")}
	}
	return field.ErrorList{field.NotSupported(path, p, []corev1.RestartPolicy{
		corev1.RestartPolicyAlways, corev1.RestartPolicyOnFailure, corev1.RestartPolicyNever})}
}

func validateDNSPolicy(p corev1.DNSPolicy, path *field.Path) field.ErrorList {
	switch p {
	case corev1.DNSClusterFirstWithHostNet, corev1.DNSClusterFirst, corev1.DNSDefault, corev1.DNSNone:
		return nil
	case "":
		return field.ErrorList{field.Required(path, "")}
	}
	return field.ErrorList{field.NotSupported(path, p, []corev1.DNSPolicy{
		corev1.DNSClusterFirstWithHostNet, corev1.DNSClusterFirst, corev1.DNSDefault, corev1.DNSNone})}
}

func validateDNSConfig(cfg *corev1.PodDNSConfig, policy corev1.DNSPolicy, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if policy == corev1.DNSNone {
		if cfg == nil {
			return field.ErrorList{field.Required(path, "must provide `dnsConfig` when `dnsPolicy` is None")}
		}
		if len(cfg.Nameservers) == 0 {
			errs = append(errs, field.Required(path.Child("nameservers"), "must provide at least one DNS nameserver when `dnsPolicy` is None"))
		}
	}
	if cfg == nil {
		return errs
	}
	if len(cfg.Nameservers) > maxDNSNameservers {
		errs = append(errs, field.Invalid(path.Child("nameservers"), cfg.Nameservers, "must not have more than 3 nameservers"))
	}
	for i, ns := range cfg.Nameservers {
		if net.ParseIP(ns) == nil {
			errs = append(errs, field.Invalid(path.Child("nameservers").Index(i), ns, "must be valid IP address"))
		}
	}
	if len(cfg.Searches) > maxDNSSearchPaths {
		errs = append(errs, field.Invalid(path.Child("searches"), cfg.Searches, "must not have more than 32 search paths"))
	}
	if len(strings.Join(cfg.Searches, " ")) > maxDNSSearchChars {
		errs = append(errs, field.Invalid(path.Child("searches"), cfg.Searches, "must not have more than 2048 characters (including spaces) in the search list"))
	}
	for i, s := range cfg.Searches {
		// A trailing dot only marks the name as fully qualified.
		errs = append(errs, dns1123Subdomain(strings.TrimSuffix(s, "."), path.Child("searches").Index(i))...)
	}
	for i, o := range cfg.Options {
		if o.Name == "" {
			errs = append(errs, field.Required(path.Child("options").Index(i), "must not be empty"))
		}
	}
	return errs
}

func validateTolerations(tolerations []corev1.Toleration, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, t := range tolerations {
		p := path.Index(i)
		if t.Key != "" {
			errs = append(errs, metav1validation.ValidateLabelName(t.Key, p.Child("key"))...)
		}
		if t.Key == "" && t.Operator != corev1.TolerationOpExists {
			errs = append(errs, field.Invalid(p.Child("operator"), t.Operator,
				"operator must be Exists when `key` is empty, which means \"match all values and all keys\""))
		}
		if t.TolerationSeconds != nil && t.Effect != corev1.TaintEffectNoExecute {
			errs = append(errs, field.Invalid(p.Child("effect"), t.Effect, "effect must be 'NoExecute' when `tolerationSeconds` is set"))
		}
		switch t.Operator {
		case corev1.TolerationOpEqual, "":
			if msgs := validation.IsValidLabelValue(t.Value); len(msgs) != 0 {
				errs = append(errs, field.Invalid(p.Child("operator"), t.Value, strings.Join(msgs, ";")))
			}
		case corev1.TolerationOpExists:
			if t.Value != "" {
				errs = append(errs, field.Invalid(p.Child("operator"), t, "value must be empty when `operator` is 'Exists'"))
			}
		default:
			errs = append(errs, field.NotSupported(p.Child("operator"), t.Operator,
				[]corev1.TolerationOperator{corev1.TolerationOpEqual, corev1.TolerationOpExists}))
		}
		if t.Effect != "" {
			errs = append(errs, validateTaintEffect(t.Effect, p.Child("effect"))...)
		}
	}
	return errs
}

func validateTaintEffect(effect corev1.TaintEffect, path *field.Path) field.ErrorList {
	switch effect {
	case corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
		return nil
	case "":
		return field.ErrorList{field.Required(path, "")}
	}
	return field.ErrorList{field.NotSupported(path, effect, []corev1.TaintEffect{
		corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute})}
}

// validateVolumes checks volume names and sources and returns the valid
// volumes by name, for the volume mounts to refer to.
func validateVolumes(volumes []corev1.Volume, path *field.Path) (map[string]corev1.VolumeSource, field.ErrorList) {
	var errs field.ErrorList
	vols := make(map[string]corev1.VolumeSource, len(volumes))
	for i := range volumes {
		v := &volumes[i]
		p := path.Index(i)
		el := validateVolumeSource(&v.VolumeSource, p)
		if v.Name == "" {
			el = append(el, field.Required(p.Child("name"), ""))
		} else {
			el = append(el, dns1123Label(v.Name, p.Child("name"))...)
		}
		if _, dup := vols[v.Name]; dup {
			el = append(el, field.Duplicate(p.Child("name"), v.Name))
		}
		if len(el) == 0 {
			vols[v.Name] = v.VolumeSource
		}
		errs = append(errs, el...)
	}
	return vols, errs
}

// countVolumeSources counts the sources set in src (every source is a
// pointer field of VolumeSource).
func countVolumeSources(src *corev1.VolumeSource) int {
	n := 0
	v := reflect.ValueOf(src).Elem()
	for i := 0; i < v.NumField(); i++ {
		if f := v.Field(i); f.Kind() == reflect.Pointer && !f.IsNil() {
			n++
		}
	}
	return n
}

// validateVolumeSource requires exactly one source; the error for a second
// one names that source, as upstream's does.
func validateVolumeSource(src *corev1.VolumeSource, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	v := reflect.ValueOf(src).Elem()
	n := 0
	for i := 0; i < v.NumField(); i++ {
		if f := v.Field(i); f.Kind() != reflect.Pointer || f.IsNil() {
			continue
		}
		if n > 0 {
			name, _, _ := strings.Cut(v.Type().Field(i).Tag.Get("json"), ",")
			errs = append(errs, field.Forbidden(path.Child(name), "may not specify more than 1 volume type"))
		}
		n++
	}
	if n == 0 {
		return field.ErrorList{field.Required(path, "must specify a volume type")}
	}
	return append(errs, validateKnownVolumeSources(src, path)...)
}

func validateKnownVolumeSources(src *corev1.VolumeSource, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if hp := src.HostPath; hp != nil {
		errs = append(errs, validateHostPath(hp, path.Child("hostPath"))...)
	}
	if ed := src.EmptyDir; ed != nil && ed.SizeLimit != nil && ed.SizeLimit.Sign() < 0 {
		errs = append(errs, field.Forbidden(path.Child("emptyDir").Child("sizeLimit"), "SizeLimit field must be a valid resource quantity"))
	}
	if s := src.Secret; s != nil {
		p := path.Child("secret")
		if s.SecretName == "" {
			errs = append(errs, field.Required(p.Child("secretName"), ""))
		}
		errs = append(errs, validateFileMode(s.DefaultMode, p.Child("defaultMode"))...)
		errs = append(errs, validateKeyToPaths(s.Items, p.Child("items"))...)
	}
	if c := src.ConfigMap; c != nil {
		p := path.Child("configMap")
		if c.Name == "" {
			errs = append(errs, field.Required(p.Child("name"), ""))
		}
		errs = append(errs, validateFileMode(c.DefaultMode, p.Child("defaultMode"))...)
		errs = append(errs, validateKeyToPaths(c.Items, p.Child("items"))...)
	}
	if c := src.PersistentVolumeClaim; c != nil && c.ClaimName == "" {
		errs = append(errs, field.Required(path.Child("persistentVolumeClaim").Child("claimName"), ""))
	}
	if n := src.NFS; n != nil {
		p := path.Child("nfs")
		if n.Server == "" {
			errs = append(errs, field.Required(p.Child("server"), ""))
		}
		if n.Path == "" {
			errs = append(errs, field.Required(p.Child("path"), ""))
		} else if !strings.HasPrefix(n.Path, "/") {
			errs = append(errs, field.Invalid(p.Child("path"), n.Path, "must be an absolute path"))
		}
	}
	if d := src.DownwardAPI; d != nil {
		errs = append(errs, validateFileMode(d.DefaultMode, path.Child("downwardAPI").Child("defaultMode"))...)
	}
	if pr := src.Projected; pr != nil {
		errs = append(errs, validateFileMode(pr.DefaultMode, path.Child("projected").Child("defaultMode"))...)
	}
	return errs
}

func validateHostPath(hp *corev1.HostPathVolumeSource, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if hp.Path == "" {
		errs = append(errs, field.Required(path.Child("path"), ""))
	}
	errs = append(errs, validatePathNoBacksteps(hp.Path, path.Child("path"))...)
	if hp.Type != nil {
		valid := []corev1.HostPathType{corev1.HostPathUnset, corev1.HostPathDirectoryOrCreate, corev1.HostPathDirectory,
			corev1.HostPathFileOrCreate, corev1.HostPathFile, corev1.HostPathSocket, corev1.HostPathCharDev, corev1.HostPathBlockDev}
		ok := false
		for _, t := range valid {
			ok = ok || *hp.Type == t
		}
		if !ok {
			errs = append(errs, field.NotSupported(path.Child("type"), *hp.Type, valid))
		}
	}
	return errs
}

// validateFileMode checks a volume file mode: 0 to 0777.
func validateFileMode(mode *int32, path *field.Path) field.ErrorList {
	if mode != nil && (*mode < 0 || *mode > 0777) {
		return field.ErrorList{field.Invalid(path, *mode, "must be a number between 0 and 0777 (octal), both inclusive")}
	}
	return nil
}

func validateKeyToPaths(items []corev1.KeyToPath, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, it := range items {
		p := path.Index(i)
		if it.Key == "" {
			errs = append(errs, field.Required(p.Child("key"), ""))
		}
		if it.Path == "" {
			errs = append(errs, field.Required(p.Child("path"), ""))
		}
		errs = append(errs, validateLocalDescendingPath(it.Path, p.Child("path"))...)
		errs = append(errs, validateFileMode(it.Mode, p.Child("mode"))...)
	}
	return errs
}

// validateLocalDescendingPath requires a relative path that stays below its
// base: not absolute, no ".." element.
func validateLocalDescendingPath(target string, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if strings.HasPrefix(target, "/") {
		errs = append(errs, field.Invalid(path, target, "must be a relative path"))
	}
	return append(errs, validatePathNoBacksteps(target, path)...)
}

func validatePathNoBacksteps(target string, path *field.Path) field.ErrorList {
	for _, part := range strings.Split(strings.ReplaceAll(target, "\\", "/"), "/") {
		if part == ".." {
			return field.ErrorList{field.Invalid(path, target, "must not contain '..'")}
		}
	}
	return nil
}

// validateImageWhitespace applies the check upstream makes for pods but not
// for templates (where " " is a placeholder some tools rely on).
func validateImageWhitespace(spec *corev1.PodSpec, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	check := func(containers []corev1.Container, p *field.Path) {
		for i, c := range containers {
			if len(strings.TrimSpace(c.Image)) != len(c.Image) {
				errs = append(errs, field.Invalid(p.Index(i).Child("image"), c.Image, "must not have leading or trailing whitespace"))
			}
		}
	}
	check(spec.Containers, path.Child("containers"))
	check(spec.InitContainers, path.Child("initContainers"))
	return errs
}

// validatePodTemplate validates a workload's pod template: its labels and
// annotations and its pod spec. Templates may not carry ephemeral containers.
func validatePodTemplate(t *corev1.PodTemplateSpec, path *field.Path) field.ErrorList {
	errs := metav1validation.ValidateLabels(t.Labels, path.Child("labels"))
	errs = append(errs, apivalidation.ValidateAnnotations(t.Annotations, path.Child("annotations"))...)
	errs = append(errs, validatePodSpec(&t.Spec, path.Child("spec"))...)
	if len(t.Spec.EphemeralContainers) > 0 {
		errs = append(errs, field.Forbidden(path.Child("spec", "ephemeralContainers"), "ephemeral containers not allowed in pod template"))
	}
	return errs
}
