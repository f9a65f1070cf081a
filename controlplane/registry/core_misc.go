package registry

import (
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
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

		Columns: configMapColumns(),
		Row:     row(configMapRow),
	}
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

		Fields:  selectable(func(s *corev1.Secret) fields.Set { return fields.Set{"type": string(s.Type)} }),
		Columns: secretColumns(),
		Row:     row(secretRow),
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
		// token: TokenRequest, answered by the API server (kubectl create token).
		Subresources: []string{"token"},

		Columns: serviceAccountColumns(),
		Row:     row(serviceAccountRow),
	}
}

// fieldsBool renders a boolean field selector value as upstream does.
func fieldsBool(b bool) string { return strconv.FormatBool(b) }
