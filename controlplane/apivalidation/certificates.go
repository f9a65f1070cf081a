package apivalidation

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/kubernetes/pkg/apis/certificates"
	certificatesvalidation "k8s.io/kubernetes/pkg/apis/certificates/validation"
)

// csrUpdate names the write a CertificateSigningRequest update is:
// upstream validates each of its strategies differently.
type csrUpdate int

const (
	csrMain csrUpdate = iota
	csrStatus
	csrApproval
)

// validateCertificates runs upstream's CertificateSigningRequest strategy
// validation (pkg/registry/certificates/certificates): old is nil for a
// create.
func validateCertificates(obj, old runtime.Object, sub csrUpdate) (field.ErrorList, bool) {
	csr, ok := obj.(*certificates.CertificateSigningRequest)
	if !ok {
		return nil, false
	}
	if old == nil {
		return certificatesvalidation.ValidateCertificateSigningRequestCreate(csr), true
	}
	oldCSR := old.(*certificates.CertificateSigningRequest)
	switch sub {
	case csrStatus:
		return certificatesvalidation.ValidateCertificateSigningRequestStatusUpdate(csr, oldCSR), true
	case csrApproval:
		return certificatesvalidation.ValidateCertificateSigningRequestApprovalUpdate(csr, oldCSR), true
	}
	return certificatesvalidation.ValidateCertificateSigningRequestUpdate(csr, oldCSR), true
}

// ValidateApprovalUpdate validates an update of
// certificatesigningrequests/approval.
func (v *Validator) ValidateApprovalUpdate(obj, old runtime.Object) field.ErrorList {
	in, oldIn, err := v.internalPair(obj, old)
	if err != nil {
		return field.ErrorList{field.InternalError(nil, err)}
	}
	if errs, ok := validateCertificates(in, oldIn, csrApproval); ok {
		return errs
	}
	return unsupported("approval", obj)
}
