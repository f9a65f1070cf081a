package volumes

import (
	"errors"
	"fmt"
)

// ErrUnsupported is matched (errors.Is) by every *UnsupportedError: a
// volume type, medium or projected source the nodelet cannot provide.
var ErrUnsupported = errors.New("volumes: unsupported volume type")

// UnsupportedError says a volume asks for something this node cannot
// provide (yet), e.g. a projected serviceAccountToken. Retrying does not
// help until the spec or the cluster changes; the caller reports it as a
// FailedMount event like any other set-up error.
type UnsupportedError struct {
	// Type names what was asked for: a volume type ("nfs"), an emptyDir
	// medium ("emptyDir medium HugePages") or a projected source
	// ("projected serviceAccountToken").
	Type string
	// Reason explains, when there is more to say than "unsupported".
	Reason string
}

func (e *UnsupportedError) Error() string {
	if e.Reason != "" {
		return fmt.Sprintf("%s: %s", e.Type, e.Reason)
	}
	return fmt.Sprintf("%v: %s", ErrUnsupported, e.Type)
}

// Is makes errors.Is(err, ErrUnsupported) hold.
func (e *UnsupportedError) Is(target error) bool { return target == ErrUnsupported }

// VolumeError is the failure of one volume of one pod, as returned
// (possibly joined with others) by SetupPod and UpdatePod. Its message
// suits a FailedMount event; Err is the cause.
type VolumeError struct {
	Op     string // "set up" or "update"
	Pod    string // namespace/name
	Volume string
	Err    error
}

func (e *VolumeError) Error() string {
	return fmt.Sprintf("%s volume %q of pod %s: %v", e.Op, e.Volume, e.Pod, e.Err)
}

func (e *VolumeError) Unwrap() error { return e.Err }
