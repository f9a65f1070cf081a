package runtime

import (
	"errors"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestStartErrorWaiting(t *testing.T) {
	boom := errors.New("boom")
	never := fmt.Errorf("image %q: %w", "x:1", ErrImageNeverPull)
	invalid := fmt.Errorf("%w: %q: bad", ErrInvalidImageName, "X")
	config := fmt.Errorf("create container a: %w: %w", ErrContainerConfig, boom)
	tests := []struct {
		name   string
		err    error
		want   string // "" when not a start failure
		wantMs string
	}{
		{"pull", &StartError{"a", StagePull, boom}, ReasonErrImagePull, "boom"},
		{"pull: never", &StartError{"a", StagePull, never}, ReasonErrImageNeverPull, never.Error()},
		{"pull: invalid name", &StartError{"a", StagePull, invalid}, ReasonInvalidImageName, invalid.Error()},
		{"config", &StartError{"a", StageConfig, boom}, ReasonCreateContainerConfigError, "boom"},
		{"create: termination log", &StartError{"a", StageCreate, boom}, ReasonCreateContainerError, "boom"},
		{"create: bad config", &StartError{"a", StageCreate, config}, ReasonCreateContainerConfigError, config.Error()},
		{"start", &StartError{"a", StageStart, boom}, ReasonRunContainerError, "boom"},
		{"start: config sentinel does not matter", &StartError{"a", StageStart, config}, ReasonRunContainerError, config.Error()},
		{"wrapped", fmt.Errorf("sync pod: %w", &StartError{"a", StagePull, never}), ReasonErrImageNeverPull, never.Error()},
		{"wrapped twice", fmt.Errorf("x: %w", fmt.Errorf("y: %w", &StartError{"a", StageCreate, config})), ReasonCreateContainerConfigError, config.Error()},
		{"joined", errors.Join(boom, &StartError{"a", StageStart, boom}), ReasonRunContainerError, "boom"},
		{"not a start error", fmt.Errorf("x: %w", ErrImageNeverPull), "", ""},
		{"nil", nil, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := WaitingFor(tt.err)
			want := corev1.ContainerStateWaiting{Reason: tt.want, Message: tt.wantMs}
			if ok != (tt.want != "") || got != want {
				t.Errorf("WaitingFor = %+v, %v; want %+v, %v", got, ok, want, tt.want != "")
			}
		})
	}
}

func TestStartErrorChain(t *testing.T) {
	err := fmt.Errorf("sync: %w", &StartError{Container: "a", Stage: StagePull, Err: fmt.Errorf("pull: %w", ErrImageNeverPull)})
	if !errors.Is(err, ErrImageNeverPull) {
		t.Error("StartError does not unwrap to its cause")
	}
	var se *StartError
	if !errors.As(err, &se) || se.Container != "a" || se.Stage != StagePull {
		t.Errorf("errors.As: %+v", se)
	}
	for stage, want := range map[StartStage]string{
		StagePull:   "pull image for container a: boom",
		StageConfig: "configure container a: boom",
		StageCreate: "create container a: boom",
		StageStart:  "start container a: boom",
	} {
		if got := (&StartError{"a", stage, errors.New("boom")}).Error(); got != want {
			t.Errorf("Error() = %q, want %q", got, want)
		}
	}
}
