package runtime

// The vocabulary of exec, attach and port-forward as the node API
// (package nodeapi) speaks it to the executor (package runtime/containerd).

import (
	"errors"
	"strconv"
)

// ErrNotAttachable: the container has neither stdin nor a tty; its output
// is in its log.
var ErrNotAttachable = errors.New("container has neither stdin nor a tty")

// ErrContainerNotRunning is returned (wrapped, with the container's id)
// by Exec into a container that is missing, not started or exited.
var ErrContainerNotRunning = errors.New("container is not running")

// TerminalSize is a terminal's size in characters.
type TerminalSize struct{ Width, Height uint16 }

// ExitError is the non-zero exit of an exec'd command.
type ExitError struct{ Code int }

func (e *ExitError) Error() string {
	return "command terminated with exit code " + strconv.Itoa(e.Code)
}
