package registry

import (
	"encoding/json"
	"reflect"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// maxSecretSize bounds the data of a secret or config map (1 MiB, upstream's
// MaxSecretSize).
const maxSecretSize = 1 * 1024 * 1024

func namespaceResource() *Resource {
	return &Resource{
		GroupVersion: corev1.SchemeGroupVersion,
		Name:         "namespaces",
		Kind:         "Namespace",
		ListKind:     "NamespaceList",
		ShortNames:   []string{"ns"},
		Verbs:        verbsWithoutDeleteCollection(),
		New:          func() runtime.Object { return &corev1.Namespace{} },
		NewList:      func() runtime.Object { return &corev1.NamespaceList{} },
		Subresources: []string{"status", "finalize"},

		Default:          mutate(defaultNamespace),
		PrepareForCreate: mutate(prepareNamespaceForCreate),
		PrepareForUpdate: mutate2(func(ns, old *corev1.Namespace) {
			// Finalizers change only through the finalize subresource.
			ns.Spec.Finalizers = append([]corev1.FinalizerName(nil), old.Spec.Finalizers...)
			ns.Status = *old.Status.DeepCopy()
		}),
		PrepareForStatusUpdate: mutate2(func(ns, old *corev1.Namespace) {
			ns.Spec = *old.Spec.DeepCopy()
			keepMetaForStatus(&ns.ObjectMeta, &old.ObjectMeta)
		}),
		PrepareForFinalizeUpdate: mutate2(func(ns, old *corev1.Namespace) {
			ns.Status = *old.Status.DeepCopy()
			keepMetaForStatus(&ns.ObjectMeta, &old.ObjectMeta)
		}),
		Validate: validate(func(ns *corev1.Namespace) field.ErrorList {
			errs := validateMeta(ns, false, apivalidation.NameIsDNSLabel)
			return append(errs, validateNamespaceFinalizers(ns)...)
		}),
		ValidateUpdate:       validate2(func(ns, old *corev1.Namespace) field.ErrorList { return validateMetaUpdate(ns, old) }),
		ValidateStatusUpdate: validate2(validateNamespaceStatusUpdate),
		ValidateFinalizeUpdate: validate2(func(ns, old *corev1.Namespace) field.ErrorList {
			return append(validateMetaUpdate(ns, old), validateNamespaceFinalizers(ns)...)
		}),
		Fields: selectable(func(ns *corev1.Namespace) fields.Set {
			return fields.Set{"status.phase": string(ns.Status.Phase)}
		}),
		Columns: namespaceColumns(),
		Row:     row(namespaceRow),
	}
}

// defaultNamespace labels the namespace with its own name (so selectors can
// pick namespaces by name) and defaults the phase to Active.
func defaultNamespace(ns *corev1.Namespace) {
	if ns.Name != "" {
		if ns.Labels == nil {
			ns.Labels = map[string]string{}
		}
		ns.Labels[corev1.LabelMetadataName] = ns.Name
	}
	if ns.Status.Phase == "" {
		ns.Status.Phase = corev1.NamespaceActive
	}
}

// prepareNamespaceForCreate makes a new namespace Active and ensures the
// "kubernetes" finalizer, which the namespace controller removes once it has
// deleted the namespace's content.
func prepareNamespaceForCreate(ns *corev1.Namespace) {
	ns.Status = corev1.NamespaceStatus{Phase: corev1.NamespaceActive}
	for _, f := range ns.Spec.Finalizers {
		if f == corev1.FinalizerKubernetes {
			return
		}
	}
	ns.Spec.Finalizers = append(ns.Spec.Finalizers, corev1.FinalizerKubernetes)
}

func validateNamespaceFinalizers(ns *corev1.Namespace) field.ErrorList {
	var errs field.ErrorList
	path := field.NewPath("spec", "finalizers")
	for i, f := range ns.Spec.Finalizers {
		errs = append(errs, apivalidation.ValidateFinalizerName(string(f), path.Index(i))...)
		errs = append(errs, validateKubeFinalizerName(string(f), path.Index(i))...)
	}
	return errs
}

// validateNamespaceStatusUpdate ties the phase to deletion: Active until the
// namespace is deleted, Terminating after.
func validateNamespaceStatusUpdate(ns, old *corev1.Namespace) field.ErrorList {
	errs := validateMetaUpdate(ns, old)
	path := field.NewPath("status", "Phase")
	if ns.DeletionTimestamp.IsZero() {
		if ns.Status.Phase != corev1.NamespaceActive {
			errs = append(errs, field.Invalid(path, ns.Status.Phase, "may only be 'Active' if `deletionTimestamp` is empty"))
		}
	} else if ns.Status.Phase != corev1.NamespaceTerminating {
		errs = append(errs, field.Invalid(path, ns.Status.Phase, "may only be 'Terminating' if `deletionTimestamp` is not empty"))
	}
	return errs
}

func configMapResource() *Resource {
	return &Resource{
		GroupVersion: corev1.SchemeGroupVersion,
		Name:         "configmaps",
		Kind:         "ConfigMap",
		ListKind:     "ConfigMapList",
		Namespaced:   true,
		ShortNames:   []string{"cm"},
		Verbs:        allVerbs(),
		New:          func() runtime.Object { return &corev1.ConfigMap{} },
		NewList:      func() runtime.Object { return &corev1.ConfigMapList{} },

		Validate: validate(func(cm *corev1.ConfigMap) field.ErrorList {
			return append(validateMeta(cm, true, apivalidation.NameIsDNSSubdomain), validateConfigMapData(cm)...)
		}),
		ValidateUpdate: validate2(validateConfigMapUpdate),
		Columns:        configMapColumns(),
		Row:            row(configMapRow),
	}
}

func validateConfigMapData(cm *corev1.ConfigMap) field.ErrorList {
	var errs field.ErrorList
	size := 0
	for _, key := range sortedKeys(cm.Data) {
		p := field.NewPath("data").Key(key)
		for _, msg := range validation.IsConfigMapKey(key) {
			errs = append(errs, field.Invalid(p, key, msg))
		}
		if _, dup := cm.BinaryData[key]; dup {
			errs = append(errs, field.Invalid(p, key, "duplicate of key present in binaryData"))
		}
		size += len(cm.Data[key])
	}
	for _, key := range sortedKeys(cm.BinaryData) {
		for _, msg := range validation.IsConfigMapKey(key) {
			errs = append(errs, field.Invalid(field.NewPath("binaryData").Key(key), key, msg))
		}
		size += len(cm.BinaryData[key])
	}
	if size > maxSecretSize {
		errs = append(errs, field.TooLong(field.NewPath(""), "", maxSecretSize))
	}
	return errs
}

// validateConfigMapUpdate freezes the data of a config map marked immutable.
func validateConfigMapUpdate(cm, old *corev1.ConfigMap) field.ErrorList {
	errs := validateMetaUpdate(cm, old)
	if old.Immutable != nil && *old.Immutable {
		if cm.Immutable == nil || !*cm.Immutable {
			errs = append(errs, field.Forbidden(field.NewPath("immutable"), "field is immutable when `immutable` is set"))
		}
		if !reflect.DeepEqual(cm.Data, old.Data) {
			errs = append(errs, field.Forbidden(field.NewPath("data"), "field is immutable when `immutable` is set"))
		}
		if !reflect.DeepEqual(cm.BinaryData, old.BinaryData) {
			errs = append(errs, field.Forbidden(field.NewPath("binaryData"), "field is immutable when `immutable` is set"))
		}
	}
	return append(errs, validateConfigMapData(cm)...)
}

func secretResource() *Resource {
	return &Resource{
		GroupVersion: corev1.SchemeGroupVersion,
		Name:         "secrets",
		Kind:         "Secret",
		ListKind:     "SecretList",
		Namespaced:   true,
		Verbs:        allVerbs(),
		New:          func() runtime.Object { return &corev1.Secret{} },
		NewList:      func() runtime.Object { return &corev1.SecretList{} },

		Default: mutate(defaultSecret),
		Validate: validate(func(s *corev1.Secret) field.ErrorList {
			return append(validateMeta(s, true, apivalidation.NameIsDNSSubdomain), validateSecretData(s)...)
		}),
		ValidateUpdate: validate2(validateSecretUpdate),
		Fields:         selectable(func(s *corev1.Secret) fields.Set { return fields.Set{"type": string(s.Type)} }),
		Columns:        secretColumns(),
		Row:            row(secretRow),
	}
}

// defaultSecret defaults the type to Opaque and folds the write-only
// stringData into data, as the v1 conversion does (stringData wins).
func defaultSecret(s *corev1.Secret) {
	if s.Type == "" {
		s.Type = corev1.SecretTypeOpaque
	}
	if len(s.StringData) > 0 && s.Data == nil {
		s.Data = map[string][]byte{}
	}
	for k, v := range s.StringData {
		s.Data[k] = []byte(v)
	}
	s.StringData = nil
}

// validateSecretData checks keys, the total size and the keys each
// well-known secret type requires.
func validateSecretData(s *corev1.Secret) field.ErrorList {
	var errs field.ErrorList
	data := field.NewPath("data")
	size := 0
	for _, key := range sortedKeys(s.Data) {
		for _, msg := range validation.IsConfigMapKey(key) {
			errs = append(errs, field.Invalid(data.Key(key), key, msg))
		}
		size += len(s.Data[key])
	}
	if size > maxSecretSize {
		errs = append(errs, field.TooLong(data, "", maxSecretSize))
	}
	requireKey := func(key string) {
		if _, ok := s.Data[key]; !ok {
			errs = append(errs, field.Required(data.Key(key), ""))
		}
	}
	switch s.Type {
	case corev1.SecretTypeServiceAccountToken:
		if s.Annotations[corev1.ServiceAccountNameKey] == "" {
			errs = append(errs, field.Required(field.NewPath("metadata", "annotations").Key(corev1.ServiceAccountNameKey), ""))
		}
	case corev1.SecretTypeDockercfg:
		errs = append(errs, validateJSONKey(s.Data, corev1.DockerConfigKey, data)...)
	case corev1.SecretTypeDockerConfigJson:
		errs = append(errs, validateJSONKey(s.Data, corev1.DockerConfigJsonKey, data)...)
	case corev1.SecretTypeBasicAuth:
		_, user := s.Data[corev1.BasicAuthUsernameKey]
		_, pass := s.Data[corev1.BasicAuthPasswordKey]
		if !user && !pass {
			requireKey(corev1.BasicAuthUsernameKey)
			requireKey(corev1.BasicAuthPasswordKey)
		}
	case corev1.SecretTypeSSHAuth:
		if len(s.Data[corev1.SSHAuthPrivateKey]) == 0 {
			errs = append(errs, field.Required(data.Key(corev1.SSHAuthPrivateKey), ""))
		}
	case corev1.SecretTypeTLS:
		requireKey(corev1.TLSCertKey)
		requireKey(corev1.TLSPrivateKeyKey)
	}
	return errs
}

func validateJSONKey(data map[string][]byte, key string, path *field.Path) field.ErrorList {
	b, ok := data[key]
	if !ok {
		return field.ErrorList{field.Required(path.Key(key), "")}
	}
	if err := json.Unmarshal(b, &map[string]interface{}{}); err != nil {
		return field.ErrorList{field.Invalid(path.Key(key), "<secret contents redacted>", err.Error())}
	}
	return nil
}

// validateSecretUpdate keeps the type, and the data of an immutable secret.
func validateSecretUpdate(s, old *corev1.Secret) field.ErrorList {
	errs := validateMetaUpdate(s, old)
	errs = append(errs, apivalidation.ValidateImmutableField(s.Type, old.Type, field.NewPath("type"))...)
	if old.Immutable != nil && *old.Immutable {
		if s.Immutable == nil || !*s.Immutable {
			errs = append(errs, field.Forbidden(field.NewPath("immutable"), "field is immutable when `immutable` is set"))
		}
		if !reflect.DeepEqual(s.Data, old.Data) {
			errs = append(errs, field.Forbidden(field.NewPath("data"), "field is immutable when `immutable` is set"))
		}
	}
	return append(errs, validateSecretData(s)...)
}

func serviceAccountResource() *Resource {
	return &Resource{
		GroupVersion: corev1.SchemeGroupVersion,
		Name:         "serviceaccounts",
		Kind:         "ServiceAccount",
		ListKind:     "ServiceAccountList",
		Namespaced:   true,
		ShortNames:   []string{"sa"},
		Verbs:        allVerbs(),
		New:          func() runtime.Object { return &corev1.ServiceAccount{} },
		NewList:      func() runtime.Object { return &corev1.ServiceAccountList{} },

		Validate: validate(func(sa *corev1.ServiceAccount) field.ErrorList {
			return validateMeta(sa, true, apivalidation.NameIsDNSSubdomain)
		}),
		ValidateUpdate: validate2(func(sa, old *corev1.ServiceAccount) field.ErrorList { return validateMetaUpdate(sa, old) }),
		Columns:        serviceAccountColumns(),
		Row:            row(serviceAccountRow),
	}
}

// fieldsBool renders a boolean field selector value as upstream does.
func fieldsBool(b bool) string { return strconv.FormatBool(b) }
