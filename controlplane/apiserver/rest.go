package apiserver

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/warning"

	"github.com/nodelet/nodelet/controlplane/registry"
	"github.com/nodelet/nodelet/controlplane/storage"
)

// serveResource dispatches one resource request by verb and subresource.
func (s *Server) serveResource(w http.ResponseWriter, r *http.Request, info requestInfo) {
	res := info.Resource
	if res == nil {
		writeError(w, apierrors.NewNotFound(schemaGR(info.GV.Group, info.ResourceArg), ""))
		return
	}
	if !res.Namespaced && info.Namespace != "" {
		writeError(w, apierrors.NewNotFound(groupResource(res), info.Name))
		return
	}
	if res.Warning != "" {
		addWarnings(w, []string{res.Warning})
	}
	if isConnect(info) {
		if err := s.serveConnect(w, r, info); err != nil {
			writeError(w, err)
		}
		return
	}
	if info.Subresource != "" && !res.HasSubresource(info.Subresource) || info.SubPath != "" {
		writeError(w, apierrors.NewNotFound(groupResource(res), info.Name+"/"+info.Subresource+info.SubPath))
		return
	}
	if r.Method == http.MethodPost || r.Method == http.MethodPut || r.Method == http.MethodPatch {
		r = r.WithContext(warning.WithWarningRecorder(r.Context(), &headerWarnings{w: w}))
	}
	var err error
	switch {
	case res.Review:
		err = s.serveReview(w, r, info)
	case info.Subresource == "scale":
		err = s.serveScale(w, r, info)
	case info.Subresource == "token":
		err = s.serveTokenRequest(w, r, info)
	case info.Subresource == "binding":
		err = s.serveBinding(w, r, info)
	case info.Subresource == "eviction":
		err = s.serveEviction(w, r, info)
	case info.Subresource == "finalize":
		err = s.serveFinalize(w, r, info)
	default:
		err = s.serveVerb(w, r, info)
	}
	if err != nil {
		var status apierrors.APIStatus
		if !errors.As(err, &status) {
			s.log.Error("request failed", "verb", info.Verb, "resource", res.Name, "namespace", info.Namespace, "name", info.Name, "err", err)
		}
		writeError(w, err)
	}
}

func (s *Server) serveVerb(w http.ResponseWriter, r *http.Request, info requestInfo) error {
	switch info.Verb {
	case "get":
		obj, _, err := s.getObject(r.Context(), info.Resource, info.Namespace, info.Name)
		if err != nil {
			return err
		}
		return s.writeObject(w, r, http.StatusOK, info.Resource, obj)
	case "list":
		return s.serveList(w, r, info)
	case "watch":
		return s.serveWatch(w, r, info)
	case "create":
		// A resource may stop taking creates while it is served (a
		// terminating CustomResourceDefinition's), as upstream's handler.
		if info.Subresource != "" || info.Name != "" || !slices.Contains(info.Resource.Verbs, "create") {
			return apierrors.NewMethodNotSupported(groupResource(info.Resource), "create")
		}
		return s.serveCreate(w, r, info)
	case "update":
		return s.serveUpdate(w, r, info)
	case "patch":
		return s.servePatch(w, r, info)
	case "delete":
		if info.Subresource != "" {
			return apierrors.NewMethodNotSupported(groupResource(info.Resource), "delete")
		}
		return s.serveDelete(w, r, info)
	case "deletecollection":
		return s.serveDeleteCollection(w, r, info)
	}
	return apierrors.NewMethodNotSupported(groupResource(info.Resource), r.Method)
}

// decodeObject decodes a request body into a new object of res's type and
// checks that its apiVersion and kind, if given, are res's.
func (s *Server) decodeObject(w http.ResponseWriter, r *http.Request, res *registry.Resource) (runtime.Object, error) {
	directive, err := fieldValidation(r)
	if err != nil {
		return nil, err
	}
	obj := res.New()
	warnings, err := s.decodeBody(r, obj, directive)
	if err != nil {
		return nil, err
	}
	addWarnings(w, warnings)
	if err := checkKind(obj, res); err != nil {
		return nil, err
	}
	setTypeMeta(res, obj)
	if err := dropUnknownFields(w, res, obj, directive); err != nil {
		return nil, err
	}
	return obj, nil
}

func checkKind(obj runtime.Object, res *registry.Resource) error {
	gvk := obj.GetObjectKind().GroupVersionKind()
	want := res.GroupVersionKind()
	if gvk.Kind != "" && gvk.Kind != want.Kind {
		return apierrors.NewBadRequest(fmt.Sprintf("the kind in the request body (%s) does not match the expected kind (%s)", gvk.Kind, want.Kind))
	}
	if gvk.Version != "" && gvk.GroupVersion() != want.GroupVersion() {
		return apierrors.NewBadRequest(fmt.Sprintf("the API version in the data (%s) does not match the expected API version (%s)", gvk.GroupVersion(), want.GroupVersion()))
	}
	return nil
}

// writeOpts are what reaches the write paths of a request's options.
type writeOpts struct {
	dryRun bool
	// manager is the request's field manager; "" for the server's own
	// writes, which leave the managed fields as they are.
	manager string
	// ownFields: the update's fn keeps the managed fields itself (apply,
	// scale), so the update does not record an update by manager.
	ownFields bool
}

// createOpts reads and validates a create's options, as upstream's
// handler does (ValidateCreateOptions).
func createOpts(r *http.Request) (writeOpts, error) {
	q := r.URL.Query()
	o := &metav1.CreateOptions{DryRun: q["dryRun"], FieldManager: q.Get("fieldManager")}
	if errs := validation.ValidateCreateOptions(o); len(errs) > 0 {
		return writeOpts{}, apierrors.NewInvalid(schemaGK(metav1.GroupName, "CreateOptions"), "", errs)
	}
	return writeOpts{dryRun: isDryRun(r), manager: managerOrUserAgent(o.FieldManager, r.UserAgent())}, nil
}

// updateOpts reads and validates an update's options.
func updateOpts(r *http.Request) (writeOpts, error) {
	q := r.URL.Query()
	o := &metav1.UpdateOptions{DryRun: q["dryRun"], FieldManager: q.Get("fieldManager")}
	if errs := validation.ValidateUpdateOptions(o); len(errs) > 0 {
		return writeOpts{}, apierrors.NewInvalid(schemaGK(metav1.GroupName, "UpdateOptions"), "", errs)
	}
	return writeOpts{dryRun: isDryRun(r), manager: managerOrUserAgent(o.FieldManager, r.UserAgent())}, nil
}

func isDryRun(r *http.Request) bool {
	for _, v := range r.URL.Query()["dryRun"] {
		if v == "All" {
			return true
		}
	}
	return false
}

func (s *Server) serveCreate(w http.ResponseWriter, r *http.Request, info requestInfo) error {
	res := info.Resource
	opts, err := createOpts(r)
	if err != nil {
		return err
	}
	obj, err := s.decodeObject(w, r, res)
	if err != nil {
		return err
	}
	m := accessor(obj)
	if res.Namespaced {
		if m.GetNamespace() != "" && m.GetNamespace() != info.Namespace {
			return apierrors.NewBadRequest("the namespace of the provided object does not match the namespace sent on the request")
		}
		m.SetNamespace(info.Namespace)
	} else {
		m.SetNamespace("")
	}
	s.auditCreate(r.Context(), res, obj)
	out, err := s.create(r.Context(), res, obj, opts)
	if err != nil {
		return err
	}
	return s.writeObject(w, r, http.StatusCreated, res, out)
}

// create runs the create path for obj: name generation, admission,
// defaults, validation and storage. Whatever admission reserved is given
// back when the object is not stored (allocations are derived from what
// is stored).
func (s *Server) create(ctx context.Context, res *registry.Resource, obj runtime.Object, opts writeOpts) (runtime.Object, error) {
	m := accessor(obj)
	generated := m.GetName() == "" && m.GetGenerateName() != ""
	for attempt := 0; ; attempt++ {
		if generated {
			m.SetName(m.GetGenerateName() + utilrand.String(5))
		}
		err := s.createOnce(ctx, res, obj, opts)
		if errors.Is(err, storage.ErrExists) {
			if generated && attempt < 3 {
				continue
			}
			return nil, apierrors.NewAlreadyExists(groupResource(res), m.GetName())
		}
		if err != nil {
			return nil, err
		}
		return obj, nil
	}
}

func (s *Server) createOnce(ctx context.Context, res *registry.Resource, obj runtime.Object, opts writeOpts) error {
	dryRun := opts.dryRun
	m := accessor(obj)
	prepareCreateMeta(res, m)
	if res.Default != nil {
		res.Default(obj)
	}
	if !opts.ownFields {
		live := res.New()
		setTypeMeta(res, live)
		s.trackUpdate(res, "", live, obj, opts)
	}
	if err := s.admitKeepingFields(ctx, writeRequest(res, "", admission.Create, obj, nil, dryRun)); err != nil {
		return err
	}
	if res.RecordRequester != nil {
		u, _ := request.UserFrom(ctx)
		res.RecordRequester(obj, u)
	}
	if res.PrepareForCreate != nil {
		res.PrepareForCreate(obj)
	}
	release, err := s.admission.allocate(ctx, obj)
	if err != nil {
		return err
	}
	defer release()
	if err := validateCreate(res, obj); err != nil {
		return err
	}
	if err := s.validateAdmission(ctx, writeRequest(res, "", admission.Create, obj, nil, dryRun)); err != nil {
		return err
	}
	if res.WarningsOnCreate != nil {
		for _, msg := range res.WarningsOnCreate(obj) {
			warning.AddWarning(ctx, "", msg)
		}
	}
	if dryRun {
		return nil
	}
	data, err := s.codec.encode(res, obj)
	if err != nil {
		return err
	}
	if err := checkStoredSize(res, m.GetName(), data); err != nil {
		return err
	}
	rev, err := s.store.Create(ctx, objectKey(res, m.GetNamespace(), m.GetName()), data)
	if err != nil {
		return err
	}
	setRV(obj, rev)
	return nil
}

func prepareCreateMeta(res *registry.Resource, m metav1.Object) {
	m.SetUID(types.UID(uuid.NewUUID()))
	m.SetCreationTimestamp(metav1.Now())
	m.SetDeletionTimestamp(nil)
	m.SetDeletionGracePeriodSeconds(nil)
	m.SetResourceVersion("")
	m.SetSelfLink("")
	if res.TrackGeneration {
		m.SetGeneration(1)
	} else {
		m.SetGeneration(0)
	}
}

func validateCreate(res *registry.Resource, obj runtime.Object) error {
	m := accessor(obj)
	if m.GetName() == "" {
		return apierrors.NewInvalid(res.GroupVersionKind().GroupKind(), "", fieldRequired("metadata.name", "name or generateName is required"))
	}
	if res.Validate == nil {
		return nil
	}
	if errs := res.Validate(obj); len(errs) > 0 {
		return apierrors.NewInvalid(res.GroupVersionKind().GroupKind(), m.GetName(), errs)
	}
	return nil
}

func (s *Server) serveUpdate(w http.ResponseWriter, r *http.Request, info requestInfo) error {
	res := info.Resource
	opts, err := updateOpts(r)
	if err != nil {
		return err
	}
	obj, err := s.decodeObject(w, r, res)
	if err != nil {
		return err
	}
	m := accessor(obj)
	if m.GetName() != info.Name {
		return apierrors.NewBadRequest(fmt.Sprintf("the name of the object (%s) does not match the name on the URL (%s)", m.GetName(), info.Name))
	}
	if res.Namespaced && m.GetNamespace() != "" && m.GetNamespace() != info.Namespace {
		return apierrors.NewBadRequest("the namespace of the provided object does not match the namespace sent on the request")
	}
	out, err := s.update(r.Context(), res, info.Namespace, info.Name, info.Subresource, opts,
		func(cur runtime.Object) (runtime.Object, error) { return obj, nil })
	if err != nil {
		return err
	}
	return s.writeObject(w, r, http.StatusOK, res, out)
}

// update is a guaranteed update: it reads the current object, lets fn
// produce the new one, applies the update rules of res (or of its status
// subresource), and writes it if anything changed. A conflict is retried
// unless the new object pins a resourceVersion, which then must be current.
func (s *Server) update(ctx context.Context, res *registry.Resource, ns, name, sub string, opts writeOpts,
	fn func(cur runtime.Object) (runtime.Object, error)) (runtime.Object, error) {
	dryRun := opts.dryRun
	for attempt := 0; ; attempt++ {
		cur, kv, err := s.getObject(ctx, res, ns, name)
		if err != nil {
			return nil, err
		}
		obj, err := fn(cur.DeepCopyObject())
		if err != nil {
			return nil, err
		}
		m := accessor(obj)
		pinned := m.GetResourceVersion() != ""
		if pinned && m.GetResourceVersion() != accessor(cur).GetResourceVersion() {
			return nil, conflict(res, name)
		}
		m.SetResourceVersion(accessor(cur).GetResourceVersion())
		// A uid in the body is a precondition, as upstream treats it: it
		// stops an update meant for an object that was since recreated.
		if uid := m.GetUID(); uid != "" && uid != accessor(cur).GetUID() {
			return nil, apierrors.NewConflict(groupResource(res), name,
				fmt.Errorf("Precondition failed: UID in precondition: %v, UID in object meta: %v", uid, accessor(cur).GetUID()))
		}
		setTypeMeta(res, obj)
		if !opts.ownFields {
			s.trackUpdate(res, sub, cur, obj, opts)
		}
		// The URL's namespace and name, not the body's, as upstream's
		// attributes (prepareUpdate resets the body's namespace later).
		adm := admissionRequest{res: res, sub: sub, op: admission.Update, ns: ns, name: name, obj: obj, old: cur, dryRun: dryRun}
		if err := s.admitKeepingFields(ctx, adm); err != nil {
			return nil, err
		}
		if err := s.prepareUpdate(res, sub, obj, cur); err != nil {
			return nil, err
		}
		if err := s.validateAdmission(ctx, adm); err != nil {
			return nil, err
		}
		if sub == "" && res.WarningsOnUpdate != nil {
			for _, msg := range res.WarningsOnUpdate(obj, cur) {
				warning.AddWarning(ctx, "", msg)
			}
		}
		release := func() {}
		if sub == "" {
			// A Service may change type and need node ports (or an IP).
			if release, err = s.admission.allocate(ctx, obj); err != nil {
				return nil, err
			}
		}
		out, err := s.storeUpdate(ctx, res, obj, cur, kv, dryRun)
		release()
		if errors.Is(err, storage.ErrConflict) {
			if pinned || attempt > 20 {
				return nil, conflict(res, name)
			}
			continue
		}
		return out, err
	}
}

// subRaw makes update skip the resource's update rules: for server-side
// changes (binding, finalize) that the rules would forbid to users.
const subRaw = "(raw)"

func conflict(res *registry.Resource, name string) error {
	return apierrors.NewConflict(groupResource(res), name,
		errors.New("the object has been modified; please apply your changes to the latest version and try again"))
}

// prepareUpdate applies the update rules: immutable metadata, the
// spec/status split, defaults, generation, validation.
func (s *Server) prepareUpdate(res *registry.Resource, sub string, obj, cur runtime.Object) error {
	m, old := accessor(obj), accessor(cur)
	m.SetNamespace(old.GetNamespace())
	m.SetUID(old.GetUID())
	m.SetCreationTimestamp(old.GetCreationTimestamp())
	m.SetDeletionTimestamp(old.GetDeletionTimestamp())
	m.SetDeletionGracePeriodSeconds(old.GetDeletionGracePeriodSeconds())
	m.SetGeneration(old.GetGeneration())
	m.SetSelfLink("")
	if old.GetDeletionTimestamp() != nil && len(m.GetFinalizers()) > len(old.GetFinalizers()) {
		return apierrors.NewForbidden(groupResource(res), m.GetName(),
			errors.New("no new finalizers can be added if the object is being deleted"))
	}
	gk := res.GroupVersionKind().GroupKind()
	if sub == subRaw {
		return nil
	}
	if sub == "finalize" {
		if res.PrepareForFinalizeUpdate != nil {
			res.PrepareForFinalizeUpdate(obj, cur)
		}
		if res.ValidateFinalizeUpdate != nil {
			if errs := res.ValidateFinalizeUpdate(obj, cur); len(errs) > 0 {
				return apierrors.NewInvalid(gk, m.GetName(), errs)
			}
		}
		return nil
	}
	if sub == "ephemeralcontainers" {
		// Upstream decodes the body with the defaulters: the new
		// ephemeral containers get theirs (imagePullPolicy, ...).
		if res.Default != nil {
			res.Default(obj)
		}
		if res.PrepareForEphemeralContainersUpdate != nil {
			res.PrepareForEphemeralContainersUpdate(obj, cur)
		}
		if res.ValidateEphemeralContainersUpdate != nil {
			if errs := res.ValidateEphemeralContainersUpdate(obj, cur); len(errs) > 0 {
				return apierrors.NewInvalid(gk, m.GetName(), errs)
			}
		}
		return nil
	}
	if sub == "approval" {
		if res.PrepareForApprovalUpdate != nil {
			res.PrepareForApprovalUpdate(obj, cur)
		}
		if res.ValidateApprovalUpdate != nil {
			if errs := res.ValidateApprovalUpdate(obj, cur); len(errs) > 0 {
				return apierrors.NewInvalid(gk, m.GetName(), errs)
			}
		}
		return nil
	}
	if sub == "status" {
		if res.PrepareForStatusUpdate != nil {
			res.PrepareForStatusUpdate(obj, cur)
		}
		if res.ValidateStatusUpdate != nil {
			if errs := res.ValidateStatusUpdate(obj, cur); len(errs) > 0 {
				return apierrors.NewInvalid(gk, m.GetName(), errs)
			}
		}
		return nil
	}
	if res.Default != nil {
		res.Default(obj)
	}
	if res.PrepareForUpdate != nil {
		res.PrepareForUpdate(obj, cur)
	}
	if res.TrackGeneration && res.SpecChanged != nil && res.SpecChanged(obj, cur) {
		m.SetGeneration(old.GetGeneration() + 1)
	}
	if res.ValidateUpdate != nil {
		if errs := res.ValidateUpdate(obj, cur); len(errs) > 0 {
			return apierrors.NewInvalid(gk, m.GetName(), errs)
		}
	}
	return nil
}

// storeUpdate writes obj over cur (read at kv). It skips writes that change
// nothing, and removes an object whose deletion was only waiting for its
// finalizers.
func (s *Server) storeUpdate(ctx context.Context, res *registry.Resource, obj, cur runtime.Object, kv storage.KV, dryRun bool) (runtime.Object, error) {
	m := accessor(obj)
	data, err := s.codec.encode(res, obj)
	if err != nil {
		return nil, err
	}
	if err := checkStoredSize(res, m.GetName(), data); err != nil {
		return nil, err
	}
	// A stale value (encrypted with a key that is no longer the first) is
	// rewritten even when nothing changed: that is how keys rotate.
	if string(data) == string(kv.Value) && !kv.Stale {
		return cur, nil
	}
	if dryRun {
		return obj, nil
	}
	key := objectKey(res, m.GetNamespace(), m.GetName())
	if finalizedForDeletion(res, obj) {
		rev, _, err := s.store.Delete(ctx, key, kv.ModRevision)
		if err != nil {
			return nil, err
		}
		setRV(obj, rev)
		return obj, nil
	}
	rev, err := s.store.Update(ctx, key, data, kv.ModRevision)
	if err != nil {
		return nil, err
	}
	setRV(obj, rev)
	return obj, nil
}

// finalizedForDeletion: an object being deleted goes away once no finalizer
// and no grace period hold it.
func finalizedForDeletion(res *registry.Resource, obj runtime.Object) bool {
	m := accessor(obj)
	if m.GetDeletionTimestamp() == nil || len(m.GetFinalizers()) > 0 {
		return false
	}
	if g := m.GetDeletionGracePeriodSeconds(); g != nil && *g > 0 {
		return false
	}
	if res.Name == "namespaces" && res.GroupVersion.Group == "" {
		return len(namespaceFinalizers(obj)) == 0
	}
	return true
}

func schemaGR(group, resource string) schema.GroupResource {
	return schema.GroupResource{Group: group, Resource: resource}
}

func fieldRequired(path, msg string) field.ErrorList {
	return field.ErrorList{field.Required(field.NewPath(path), msg)}
}

func schemaGK(group, kind string) schema.GroupKind {
	return schema.GroupKind{Group: group, Kind: kind}
}

// maxStoredBytes is the largest object the store takes, as etcd's default
// --max-request-bytes bounds what kube-apiserver can store: a patch or an
// update that grows an object past it is refused, whatever the request's
// own size.
const maxStoredBytes = 3 * 512 * 1024

// checkStoredSize refuses an encoded object over maxStoredBytes with 413.
func checkStoredSize(res *registry.Resource, name string, data []byte) error {
	if len(data) <= maxStoredBytes {
		return nil
	}
	return apierrors.NewRequestEntityTooLargeError(fmt.Sprintf("%s %q is %d bytes once encoded: the limit is %d bytes",
		groupResource(res).String(), name, len(data), maxStoredBytes))
}
