package registry

import (
	"maps"
	"slices"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/apiserver/pkg/authentication/user"
)

type csr = certificatesv1.CertificateSigningRequest

// certificateSigningRequestResource serves certificates.k8s.io/v1
// CertificateSigningRequests with upstream's three strategies
// (pkg/registry/certificates/certificates): the main resource changes
// neither spec nor status, the status subresource sets the certificate
// (and conditions other than Approved and Denied), the approval
// subresource only the conditions. Who asked is recorded from the
// request's user on create and cannot be set by the client.
func certificateSigningRequestResource() *Resource {
	return &Resource{
		GroupVersion: certificatesv1.SchemeGroupVersion,
		Name:         "certificatesigningrequests",
		Kind:         "CertificateSigningRequest",
		ListKind:     "CertificateSigningRequestList",
		ShortNames:   []string{"csr"},
		Verbs:        allVerbs(),
		Subresources: []string{"approval", "status"},
		New:          func() runtime.Object { return &csr{} },
		NewList:      func() runtime.Object { return &certificatesv1.CertificateSigningRequestList{} },
		RecordRequester: func(obj runtime.Object, u user.Info) {
			setRequester(obj.(*csr), u)
		},
		PrepareForCreate: mutate(func(c *csr) {
			c.Status = certificatesv1.CertificateSigningRequestStatus{Conditions: []certificatesv1.CertificateSigningRequestCondition{}}
		}),
		PrepareForUpdate: mutate2(func(c, old *csr) {
			c.Spec, c.Status = *old.Spec.DeepCopy(), *old.Status.DeepCopy()
		}),
		PrepareForStatusUpdate: mutate2(func(c, old *csr) {
			c.Spec = *old.Spec.DeepCopy()
			keepConditions(c, old, certificatesv1.CertificateApproved)
			keepConditions(c, old, certificatesv1.CertificateDenied)
			stampConditions(c, old, metav1.Now())
		}),
		PrepareForApprovalUpdate: mutate2(func(c, old *csr) {
			stampConditions(c, old, metav1.Now())
			conditions := c.Status.Conditions
			c.Spec, c.Status = *old.Spec.DeepCopy(), *old.Status.DeepCopy()
			c.Status.Conditions = conditions
		}),
		Fields: selectable(func(c *csr) fields.Set { return fields.Set{"spec.signerName": c.Spec.SignerName} }),
		Columns: []metav1.TableColumnDefinition{
			nameColumn(),
			ageColumn(),
			{Name: "SignerName", Type: "string", Description: certificatesv1.CertificateSigningRequestSpec{}.SwaggerDoc()["signerName"]},
			{Name: "Requestor", Type: "string", Description: certificatesv1.CertificateSigningRequestSpec{}.SwaggerDoc()["request"]},
			{Name: "RequestedDuration", Type: "string", Description: certificatesv1.CertificateSigningRequestSpec{}.SwaggerDoc()["expirationSeconds"]},
			{Name: "Condition", Type: "string", Description: certificatesv1.CertificateSigningRequestStatus{}.SwaggerDoc()["conditions"]},
		},
		Row: row(csrRow),
	}
}

// setRequester records the creating user in the spec, replacing whatever
// the client sent.
func setRequester(c *csr, u user.Info) {
	c.Spec.Username, c.Spec.UID, c.Spec.Groups, c.Spec.Extra = "", "", nil, nil
	if u == nil {
		return
	}
	c.Spec.Username, c.Spec.UID = u.GetName(), u.GetUID()
	c.Spec.Groups = slices.Clone(u.GetGroups())
	if extra := u.GetExtra(); len(extra) > 0 {
		c.Spec.Extra = map[string]certificatesv1.ExtraValue{}
		for k, v := range maps.All(extra) {
			c.Spec.Extra[k] = slices.Clone(v)
		}
	}
}

// keepConditions keeps old's conditions of type t in c when c has as
// many of them: a status update cannot rewrite an approval or a denial
// (upstream's preserveConditionInstances).
func keepConditions(c, old *csr, t certificatesv1.RequestConditionType) {
	idx := func(x *csr) []int {
		var out []int
		for i, cond := range x.Status.Conditions {
			if cond.Type == t {
				out = append(out, i)
			}
		}
		return out
	}
	oldIdx, newIdx := idx(old), idx(c)
	if len(oldIdx) != len(newIdx) {
		return // validation refuses the change
	}
	for i, o := range oldIdx {
		c.Status.Conditions[newIdx[i]] = old.Status.Conditions[o]
	}
}

// stampConditions fills conditions' missing times: now, or for a
// transition time the old condition's of the same type and status.
func stampConditions(c, old *csr, now metav1.Time) {
	for i := range c.Status.Conditions {
		cond := &c.Status.Conditions[i]
		if cond.LastUpdateTime.IsZero() {
			cond.LastUpdateTime = now
		}
		if !cond.LastTransitionTime.IsZero() {
			continue
		}
		cond.LastTransitionTime = now
		for _, o := range old.Status.Conditions {
			if o.Type == cond.Type && o.Status == cond.Status && !o.LastTransitionTime.IsZero() {
				cond.LastTransitionTime = o.LastTransitionTime
				break
			}
		}
	}
}

// csrRow is upstream's printer: the condition summarised in precedence
// order (Denied, Approved or Pending; then Failed and Issued).
func csrRow(c *csr, now time.Time) []interface{} {
	var approved, denied, failed bool
	for _, cond := range c.Status.Conditions {
		switch cond.Type {
		case certificatesv1.CertificateApproved:
			approved = true
		case certificatesv1.CertificateDenied:
			denied = true
		case certificatesv1.CertificateFailed:
			failed = true
		}
	}
	status := "Pending"
	if denied {
		status = "Denied"
	} else if approved {
		status = "Approved"
	}
	if failed {
		status += ",Failed"
	}
	if len(c.Status.Certificate) > 0 {
		status += ",Issued"
	}
	signer, requested := "<none>", "<none>"
	if c.Spec.SignerName != "" {
		signer = c.Spec.SignerName
	}
	if s := c.Spec.ExpirationSeconds; s != nil {
		requested = duration.HumanDuration(time.Duration(*s) * time.Second)
	}
	return []interface{}{c.Name, age(c.CreationTimestamp, now), signer, c.Spec.Username, requested, status}
}
