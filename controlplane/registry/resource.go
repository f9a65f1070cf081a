// Package registry describes every API resource the control plane serves:
// its names, its Go types, and the per-resource rules (defaults, the
// spec/status split, validation, field selectors, table columns) that the
// generic API handlers apply. Everything here is pure: no storage, no HTTP.
package registry

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/authentication/user"
)

// Resource is one served resource (for example apps/v1 deployments).
//
// The generic handlers call the hooks in this order:
//   - create: Default, RecordRequester, PrepareForCreate, Validate
//   - update of the main resource: Default, PrepareForUpdate, ValidateUpdate
//   - update of the status subresource: PrepareForStatusUpdate, ValidateStatusUpdate
//   - update of namespaces/finalize: PrepareForFinalizeUpdate, ValidateFinalizeUpdate
//   - update of pods/ephemeralcontainers: PrepareForEphemeralContainersUpdate,
//     ValidateEphemeralContainersUpdate
//   - update of certificatesigningrequests/approval: PrepareForApprovalUpdate,
//     ValidateApprovalUpdate
//
// Default is not called for subresource updates; PrepareForStatusUpdate
// applies what defaulting the status needs itself.
//
// Nil hooks are skipped; the handlers themselves take care of the metadata
// every object shares (uid, creationTimestamp, resourceVersion, generation,
// finalizers and deletion).
type Resource struct {
	GroupVersion schema.GroupVersion
	// Name is the plural lower-case resource name used in URLs ("pods").
	Name       string
	Kind       string
	ListKind   string
	Namespaced bool
	ShortNames []string
	// Categories such as "all" (kubectl get all).
	Categories []string
	// Verbs this resource supports, as listed in discovery.
	Verbs []string
	// Warning, when set, is sent with every request for the resource (a
	// deprecated version's warning).
	Warning string

	New     func() runtime.Object
	NewList func() runtime.Object

	// Stored, when set, is the resource this one is another version or
	// group of: its objects are kept as Stored's, under Stored's keys, as
	// upstream keeps one storage version per resource (autoscaling/v1
	// HorizontalPodAutoscalers are stored as autoscaling/v2 ones,
	// events.k8s.io/v1 Events as core/v1 Events). The handlers convert at
	// the storage boundary with Convert, so every hook, table and field
	// selector here works on this resource's own type.
	Stored *Resource
	// Convert converts in into out, between this resource's type and
	// Stored's (either way), leaving in unchanged; required with Stored.
	Convert func(in, out runtime.Object) error

	// Review marks a resource that is never stored: a create is a question
	// the API server answers in the response (SelfSubjectReview; later
	// TokenReview and the access reviews). Its only verb is create and it
	// has no hooks.
	Review bool

	// Subresources served besides the main resource, e.g. "status", "scale", "binding".
	Subresources []string

	// Scale, when set, is how the scale subresource reads and writes this
	// resource's objects (custom resources: the paths their CRD names);
	// nil: ScaleOf and ApplyScale, for the built-in scalable kinds.
	Scale *ScaleAccess

	// TrackGeneration makes the handlers set metadata.generation to 1 on
	// create and bump it whenever the spec changes.
	TrackGeneration bool

	// DropUnknown, when set, removes from a decoded request body the fields
	// the resource's schema does not declare and returns their paths
	// (custom resources: upstream's pruning), which the handlers report as
	// the request's fieldValidation says.
	DropUnknown func(obj runtime.Object) []string

	// Default fills in defaults the way upstream defaulting does.
	Default func(obj runtime.Object)
	// RecordRequester, when set, records the creating user in the object
	// (a CertificateSigningRequest's spec.username, groups, uid and extra),
	// overwriting what the client sent; u is nil only for the control
	// plane's own in-process writes.
	RecordRequester func(obj runtime.Object, u user.Info)
	// PrepareForCreate resets what a user may not set on create (usually status).
	PrepareForCreate func(obj runtime.Object)
	// PrepareForUpdate keeps what the main resource may not change (usually status: copied from old).
	PrepareForUpdate func(obj, old runtime.Object)
	// PrepareForStatusUpdate keeps what a status update may not change (spec and most metadata).
	PrepareForStatusUpdate func(obj, old runtime.Object)

	Validate             func(obj runtime.Object) field.ErrorList
	ValidateUpdate       func(obj, old runtime.Object) field.ErrorList
	ValidateStatusUpdate func(obj, old runtime.Object) field.ErrorList

	// WarningsOnCreate and WarningsOnUpdate (main resource only) return
	// upstream's warnings for a valid object, sent to the client as
	// Warning headers.
	WarningsOnCreate func(obj runtime.Object) []string
	WarningsOnUpdate func(obj, old runtime.Object) []string

	// PrepareForFinalizeUpdate and ValidateFinalizeUpdate serve the
	// namespaces/finalize subresource, which changes spec.finalizers and
	// nothing else (nil for every other resource).
	PrepareForFinalizeUpdate func(obj, old runtime.Object)
	ValidateFinalizeUpdate   func(obj, old runtime.Object) field.ErrorList

	// PrepareForEphemeralContainersUpdate and
	// ValidateEphemeralContainersUpdate serve pods/ephemeralcontainers,
	// which changes spec.ephemeralContainers and nothing else (nil for
	// every other resource).
	PrepareForEphemeralContainersUpdate func(obj, old runtime.Object)
	ValidateEphemeralContainersUpdate   func(obj, old runtime.Object) field.ErrorList

	// PrepareForApprovalUpdate and ValidateApprovalUpdate serve
	// certificatesigningrequests/approval, which changes the conditions
	// and nothing else (nil for every other resource).
	PrepareForApprovalUpdate func(obj, old runtime.Object)
	ValidateApprovalUpdate   func(obj, old runtime.Object) field.ErrorList

	// SpecChanged reports whether the generation-relevant part changed
	// (used when TrackGeneration is set).
	SpecChanged func(obj, old runtime.Object) bool

	// Fields returns the field-selector fields beyond metadata.name and
	// metadata.namespace (which the handlers add themselves).
	Fields func(obj runtime.Object) fields.Set

	// Columns and Row produce server-side table output (kubectl get). Row
	// returns every cell, the name included, in Columns order. Columns with
	// Priority 1 are shown only by -o wide.
	Columns []metav1.TableColumnDefinition
	Row     func(obj runtime.Object, now time.Time) []interface{}
}

// GroupVersionKind returns the resource's kind with its group and version.
func (r *Resource) GroupVersionKind() schema.GroupVersionKind {
	return r.GroupVersion.WithKind(r.Kind)
}

// GroupVersionResource returns the resource with its group and version.
func (r *Resource) GroupVersionResource() schema.GroupVersionResource {
	return r.GroupVersion.WithResource(r.Name)
}

// StorageResource is the resource whose keys hold this one's objects:
// Stored, or r itself.
func (r *Resource) StorageResource() *Resource {
	if r.Stored != nil {
		return r.Stored
	}
	return r
}

// HasSubresource reports whether sub is served for this resource.
func (r *Resource) HasSubresource(sub string) bool {
	for _, s := range r.Subresources {
		if s == sub {
			return true
		}
	}
	return false
}
