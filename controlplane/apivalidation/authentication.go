package apivalidation

import (
	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/kubernetes/pkg/apis/authentication"
	authenticationvalidation "k8s.io/kubernetes/pkg/apis/authentication/validation"
)

// TokenRequest applies upstream's defaults (an hour's lifetime) to tr and
// validates it as upstream's serviceaccounts/token REST does: a lifetime
// of ten minutes to 2^32 seconds, attestations only for webhook-bound
// tokens.
func (v *Validator) TokenRequest(tr *authenticationv1.TokenRequest) field.ErrorList {
	v.scheme.Default(tr)
	in, err := v.toInternal(tr)
	if err != nil {
		return field.ErrorList{field.InternalError(nil, err)}
	}
	return authenticationvalidation.ValidateTokenRequest(in.(*authentication.TokenRequest))
}
