package eviction

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestParseStatements(t *testing.T) {
	got, err := ParseStatements(" memory.available<100Mi, nodefs.available<10%,nodefs.inodesFree<5%,imagefs.available<0%,pid.available<1000 ")
	if err != nil {
		t.Fatal(err)
	}
	want := []Threshold{
		{Signal: MemoryAvailable, Value: Value{Quantity: 100 << 20}},
		{Signal: NodeFSAvailable, Value: Value{Percentage: 0.1}},
		{Signal: NodeFSInodesFree, Value: Value{Percentage: 0.05}},
		// imagefs.available<0% disables the signal
		{Signal: PIDAvailable, Value: Value{Quantity: 1000}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("ParseStatements =\n%+v\nwant\n%+v", got, want)
	}
	if got, err := ParseStatements(""); err != nil || len(got) != 0 {
		t.Errorf(`ParseStatements("") = %v, %v`, got, err)
	}
	if got, err := ParseStatements("memory.available<100%"); err != nil || len(got) != 0 {
		t.Errorf("100%% disables, as upstream documents: %v, %v", got, err)
	}
	if d := DefaultThresholds(); len(d) != 5 || d[0].Signal != MemoryAvailable || d[3].Value.Percentage != 0.15 ||
		d[4].Signal != PIDAvailable || d[4].Value.Percentage != 0.1 {
		t.Errorf("DefaultThresholds = %+v", d)
	}
}

func TestParseRefusesBadInput(t *testing.T) {
	for in, want := range map[string]string{
		"memory.available>100Mi":       "malformed pair",
		"memory.available":             "malformed pair",
		"memory.available<":            "malformed pair",
		"cpu.available<1":              `unsupported eviction signal "cpu.available"`,
		"memory.available<lots":        "memory.available",
		"nodefs.available<101%":        "must be >= 0% and <= 100%",
		"nodefs.available<-1%":         "must be >= 0% and <= 100%",
		"nodefs.available<x%":          "not a percentage",
		"memory.available<-100Mi":      "cannot be negative",
		"memory.available<1,foo.bar<2": "unsupported eviction signal",
	} {
		if _, err := ParseStatements(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseStatements(%q) error = %v, want %q", in, err, want)
		}
	}
	for in, want := range map[string]string{
		"memory.available=soon": "grace period of memory.available",
		"memory.available=-1s":  "negative",
		"memory.available<1m":   "malformed pair",
	} {
		if _, err := ParseGracePeriods(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseGracePeriods(%q) error = %v, want %q", in, err, want)
		}
	}
	if _, err := ParseMinimumReclaims("imagefs.available=-2Gi"); err == nil {
		t.Error("negative minimum reclaim accepted")
	}
}

func TestCombine(t *testing.T) {
	hard, _ := ParseStatements("memory.available<100Mi")
	soft, _ := ParseStatements("memory.available<1Gi,nodefs.available<20%")
	grace, err := ParseGracePeriods("memory.available=1m30s,nodefs.available=2m")
	if err != nil {
		t.Fatal(err)
	}
	reclaim, err := ParseMinimumReclaims("memory.available=50Mi,nodefs.available=1%")
	if err != nil {
		t.Fatal(err)
	}
	got, err := Combine(hard, soft, grace, reclaim)
	if err != nil {
		t.Fatal(err)
	}
	mem, fs := Value{Quantity: 50 << 20}, Value{Percentage: 0.01}
	want := []Threshold{
		{Signal: MemoryAvailable, Value: Value{Quantity: 100 << 20}, MinReclaim: &mem},
		{Signal: MemoryAvailable, Value: Value{Quantity: 1 << 30}, GracePeriod: 90 * time.Second, MinReclaim: &mem},
		{Signal: NodeFSAvailable, Value: Value{Percentage: 0.2}, GracePeriod: 2 * time.Minute, MinReclaim: &fs},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Combine =\n%+v\nwant\n%+v", got, want)
	}
	if !got[0].Hard() || got[1].Hard() {
		t.Error("Hard() wrong")
	}
	if _, err := Combine(nil, soft, map[Signal]time.Duration{MemoryAvailable: time.Minute}, nil); err == nil ||
		!strings.Contains(err.Error(), "grace period must be specified for the soft eviction threshold nodefs.available") {
		t.Errorf("soft threshold without grace period: %v", err)
	}
	if _, err := Combine(nil, soft[:1], map[Signal]time.Duration{MemoryAvailable: 0}, nil); err == nil {
		t.Error("zero grace period accepted")
	}
	dup, _ := ParseStatements("memory.available<1Gi,memory.available<2Gi")
	if _, err := Combine(dup, nil, nil, nil); err == nil || !strings.Contains(err.Error(), "duplicate") {
		t.Errorf("duplicate: %v", err)
	}
	if got, err := Combine(nil, nil, nil, nil); err != nil || got == nil {
		t.Errorf("no thresholds must be an empty, non-nil list: %v, %v", got, err)
	}
}
