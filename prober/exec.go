package prober

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// ExecFunc runs cmd in the running container containerID (the runtime's
// id, without a scheme) and returns its combined stdout and stderr and its
// exit code. A command that ran and exited non-zero is not an error: err
// is only for a command that could not be run (container gone, runtime
// error) or did not finish within timeout, which should then wrap
// context.DeadlineExceeded. ctx carries the timeout as its deadline and is
// also cancelled when the probe is stopped; cancelling it should kill the
// command.
type ExecFunc func(ctx context.Context, containerID string, cmd []string, timeout time.Duration) (output []byte, exitCode int, err error)

// execProbe is upstream's exec prober: exit 0 is a success, another exit
// code a failure with the command's output, a timeout a failure, and an
// error Unknown (thrown away).
func (h *handlers) execProbe(ctx context.Context, containerID string, cmd []string, timeout time.Duration) (Result, string, error) {
	if h.exec == nil {
		return Unknown, "", errors.New("exec probes are not supported: no Exec configured")
	}
	execCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	out, code, err := h.exec(execCtx, containerID, cmd, timeout)
	if len(out) > maxOutputLength {
		out = out[:maxOutputLength]
	}
	switch {
	case err == nil && code == 0:
		return Success, string(out), nil
	case err == nil:
		return Failure, string(out), nil
	case ctx.Err() == nil && (errors.Is(err, context.DeadlineExceeded) || execCtx.Err() != nil):
		// As upstream's CRI client reports an ExecSync past its timeout.
		return Failure, fmt.Sprintf("command timed out: %q timed out after %s", strings.Join(cmd, " "), timeout), nil
	default:
		return Unknown, "", fmt.Errorf("exec in container %s: %w", containerID, err)
	}
}

// expandCommand is upstream's ExpandContainerCommandOnlyStatic: $(VAR)
// references to the container's env are replaced by their values (a
// variable set from a source expands to ""), $$ is an escaped $, and
// references to unknown variables are kept.
func expandCommand(cmd []string, env []corev1.EnvVar) []string {
	if len(cmd) == 0 {
		return cmd
	}
	vars := make(map[string]string, len(env))
	for _, e := range env {
		vars[e.Name] = e.Value
	}
	out := make([]string, len(cmd))
	for i, s := range cmd {
		out[i] = expand(s, vars)
	}
	return out
}

func expand(s string, vars map[string]string) string {
	var b strings.Builder
	last := 0
	for i := 0; i < len(s)-1; i++ {
		if s[i] != '$' {
			continue
		}
		b.WriteString(s[last:i])
		switch next := s[i+1]; {
		case next == '$':
			b.WriteByte('$')
			i++
		case next == '(' && strings.IndexByte(s[i+2:], ')') >= 0:
			end := i + 2 + strings.IndexByte(s[i+2:], ')')
			name := s[i+2 : end]
			if v, ok := vars[name]; ok {
				b.WriteString(v)
			} else {
				b.WriteString("$(" + name + ")")
			}
			i = end
		default:
			b.WriteString(s[i : i+2])
			i++
		}
		last = i + 1
	}
	return b.String() + s[last:]
}
