package csi

import (
	"reflect"
	"testing"
	"time"
)

func TestPlan(t *testing.T) {
	t0 := time.Unix(100, 0)
	t1 := time.Unix(200, 0)
	for _, tc := range []struct {
		name       string
		seen       map[string]time.Time
		registered map[string]registration
		want       []action
	}{
		{name: "nothing"},
		{name: "new socket registers", seen: map[string]time.Time{"/r/b.sock": t0, "/r/a.sock": t0},
			want: []action{{Kind: actRegister, Socket: "/r/a.sock"}, {Kind: actRegister, Socket: "/r/b.sock"}}},
		{name: "registered and unchanged: nothing", seen: map[string]time.Time{"/r/a.sock": t0},
			registered: map[string]registration{"/r/a.sock": {Name: "a", ModTime: t0}}},
		{name: "socket gone deregisters", registered: map[string]registration{"/r/a.sock": {Name: "a", ModTime: t0}},
			want: []action{{Kind: actDeregister, Socket: "/r/a.sock", Name: "a"}}},
		{name: "socket made again: deregister, then register", seen: map[string]time.Time{"/r/a.sock": t1, "/r/0.sock": t0},
			registered: map[string]registration{"/r/a.sock": {Name: "a", ModTime: t0}},
			want: []action{{Kind: actDeregister, Socket: "/r/a.sock", Name: "a"},
				{Kind: actRegister, Socket: "/r/0.sock"}, {Kind: actRegister, Socket: "/r/a.sock"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := plan(tc.seen, tc.registered); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("plan = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestSupportedVersion(t *testing.T) {
	for v, ok := range map[string]bool{"1.0.0": true, "v1.13.0": true, "0.3.0": false, "2.0.0": false, "junk": false} {
		if err := supportedVersion([]string{v}); (err == nil) != ok {
			t.Errorf("supportedVersion(%q) = %v, want ok=%v", v, err, ok)
		}
	}
	if err := supportedVersion([]string{"0.2.0", "1.2.0"}); err != nil {
		t.Errorf("a list with a 1.x: %v", err)
	}
	if supportedVersion(nil) == nil {
		t.Error("no versions accepted")
	}
}
