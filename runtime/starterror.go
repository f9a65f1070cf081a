package runtime

// Why a container failed to start, as its waiting reason: the executor
// wraps each failure of a container start in a StartError naming the step
// that failed, and the waiting reason follows from it here, so the reasons
// are decided (and tested) in one place rather than where errors happen.

import (
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
)

// Waiting reasons of containers whose start failed (upstream's names).
const (
	ReasonErrImagePull               = "ErrImagePull"
	ReasonErrImageNeverPull          = "ErrImageNeverPull"
	ReasonInvalidImageName           = "InvalidImageName"
	ReasonCreateContainerConfigError = "CreateContainerConfigError"
	ReasonCreateContainerError       = "CreateContainerError"
	ReasonRunContainerError          = "RunContainerError"
)

// StartStage is the step of a container start that failed.
type StartStage int

const (
	// StagePull: ensuring the image (pull per policy, reference parsing).
	StagePull StartStage = iota
	// StageConfig: computing the container's configuration (hostname,
	// environment and the objects it refers to, services, subPaths).
	StageConfig
	// StageCreate: preparing the container's host files (termination log)
	// or the runtime's CreateContainer.
	StageCreate
	// StageStart: the runtime's StartContainer.
	StageStart
)

// String is the step as a verb phrase of the error's message.
func (s StartStage) String() string {
	switch s {
	case StagePull:
		return "pull image for"
	case StageConfig:
		return "configure"
	case StageCreate:
		return "create"
	case StageStart:
		return "start"
	}
	return fmt.Sprintf("StartStage(%d)", int(s))
}

// StartError is a failed container start: Err failed at Stage.
type StartError struct {
	Container string
	Stage     StartStage
	Err       error
}

func (e *StartError) Error() string {
	return fmt.Sprintf("%s container %s: %v", e.Stage, e.Container, e.Err)
}

func (e *StartError) Unwrap() error { return e.Err }

// Waiting is the container's waiting state after the failure: the reason
// follows from the stage (and, for pulls and creates, from the sentinel
// errors Err wraps); the message is Err's.
func (e *StartError) Waiting() corev1.ContainerStateWaiting {
	msg := ""
	if e.Err != nil {
		msg = e.Err.Error()
	}
	return corev1.ContainerStateWaiting{Reason: e.reason(), Message: msg}
}

func (e *StartError) reason() string {
	switch e.Stage {
	case StagePull:
		switch {
		case errors.Is(e.Err, ErrImageNeverPull):
			return ReasonErrImageNeverPull
		case errors.Is(e.Err, ErrInvalidImageName):
			return ReasonInvalidImageName
		}
		return ReasonErrImagePull
	case StageConfig:
		return ReasonCreateContainerConfigError
	case StageStart:
		return ReasonRunContainerError
	}
	// StageCreate: the runtime tells a bad configuration (ErrContainerConfig,
	// e.g. a missing user) from a failure to create.
	if errors.Is(e.Err, ErrContainerConfig) {
		return ReasonCreateContainerConfigError
	}
	return ReasonCreateContainerError
}

// WaitingFor finds the StartError in err's chain and gives the container's
// waiting state; false when err holds none (not a start failure).
func WaitingFor(err error) (corev1.ContainerStateWaiting, bool) {
	var se *StartError
	if !errors.As(err, &se) {
		return corev1.ContainerStateWaiting{}, false
	}
	return se.Waiting(), true
}
