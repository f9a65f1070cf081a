package containerd

import (
	"errors"
	"testing"

	runcoptions "github.com/containerd/containerd/api/types/runc/options"

	"github.com/nodelet/nodelet/runtime"
)

// The runc shim's options follow the nodelet's configuration: none at all
// by default (the shim's defaults: runc's own root, cgroupfs), the systemd
// cgroup driver exactly when asked for, and the binary of the pod's
// RuntimeClass handler.
func TestRuntimeOptions(t *testing.T) {
	handlers := map[string]string{"runc-alt": "/opt/runc", "crun": "crun"}
	for _, tc := range []struct {
		name    string
		cfg     Config
		handler string
		want    *runcoptions.Options
	}{
		{"defaults", Config{}, "", nil},
		{"default handler by name", Config{RuntimeHandlers: handlers}, "runc", nil},
		{"runc root", Config{RuncRoot: "/t/runc"}, "", &runcoptions.Options{Root: "/t/runc"}},
		{"systemd", Config{SystemdCgroup: true}, "", &runcoptions.Options{SystemdCgroup: true}},
		{"both", Config{RuncRoot: "/t/runc", SystemdCgroup: true}, "", &runcoptions.Options{Root: "/t/runc", SystemdCgroup: true}},
		{"runtime binary", Config{RuntimeBinary: "/b/runc"}, "runc", &runcoptions.Options{BinaryName: "/b/runc"}},
		{"handler", Config{RuntimeBinary: "/b/runc", RuntimeHandlers: handlers, RuncRoot: "/t/runc"}, "runc-alt",
			&runcoptions.Options{Root: "/t/runc", BinaryName: "/opt/runc"}},
		{"default handler configured", Config{RuntimeHandlers: map[string]string{"runc": "/x/runc"}}, "",
			&runcoptions.Options{BinaryName: "/x/runc"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := (&Runtime{cfg: tc.cfg}).runtimeOptions(tc.handler)
			if err != nil {
				t.Fatal(err)
			}
			if tc.want == nil {
				if got != nil {
					t.Fatalf("runtimeOptions = %#v, want nil (the shim's defaults)", got)
				}
				return
			}
			opts, ok := got.(*runcoptions.Options)
			if !ok {
				t.Fatalf("runtimeOptions = %T, want *options.Options", got)
			}
			if opts.Root != tc.want.Root || opts.SystemdCgroup != tc.want.SystemdCgroup || opts.BinaryName != tc.want.BinaryName {
				t.Errorf("runtimeOptions = root %q systemd %v binary %q, want root %q systemd %v binary %q",
					opts.Root, opts.SystemdCgroup, opts.BinaryName, tc.want.Root, tc.want.SystemdCgroup, tc.want.BinaryName)
			}
		})
	}
}

// A handler the node has no runtime for is refused in containerd's CRI
// words, which the pod's FailedCreatePodSandBox event carries.
func TestUnknownRuntimeHandler(t *testing.T) {
	_, err := (&Runtime{cfg: Config{RuntimeHandlers: map[string]string{"crun": "crun"}}}).runtimeOptions("kata")
	var unknown *runtime.UnknownRuntimeHandlerError
	if !errors.As(err, &unknown) || unknown.Handler != "kata" ||
		err.Error() != `failed to get sandbox runtime: no runtime for "kata" is configured` {
		t.Fatalf("unknown handler: %v", err)
	}
}
