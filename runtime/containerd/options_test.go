package containerd

import (
	"testing"

	runcoptions "github.com/containerd/containerd/api/types/runc/options"
)

// The runc shim's options follow the nodelet's configuration: none at all
// by default (the shim's defaults: runc's own root, cgroupfs), the systemd
// cgroup driver exactly when asked for.
func TestRuntimeOptions(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		want *runcoptions.Options
	}{
		{"defaults", Config{}, nil},
		{"runc root", Config{RuncRoot: "/t/runc"}, &runcoptions.Options{Root: "/t/runc"}},
		{"systemd", Config{SystemdCgroup: true}, &runcoptions.Options{SystemdCgroup: true}},
		{"both", Config{RuncRoot: "/t/runc", SystemdCgroup: true}, &runcoptions.Options{Root: "/t/runc", SystemdCgroup: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := (&Runtime{cfg: tc.cfg}).runtimeOptions()
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
			if opts.Root != tc.want.Root || opts.SystemdCgroup != tc.want.SystemdCgroup {
				t.Errorf("runtimeOptions = root %q systemd %v, want root %q systemd %v",
					opts.Root, opts.SystemdCgroup, tc.want.Root, tc.want.SystemdCgroup)
			}
		})
	}
}
