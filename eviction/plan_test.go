package eviction

import (
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

const mi = 1 << 20

var t0 = time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)

func memObs(available int64) Observations {
	return Observations{MemoryAvailable: {Available: available, Capacity: 4096 * mi}}
}

func signals(ts []Threshold) []string {
	var out []string
	for _, t := range ts {
		out = append(out, t.key())
	}
	return out
}

func TestPlanHardThreshold(t *testing.T) {
	th := []Threshold{{Signal: MemoryAvailable, Value: Value{Quantity: 100 * mi}}}
	d := Plan(Inputs{Now: t0, Thresholds: th, Observations: memObs(200 * mi), TransitionPeriod: time.Minute}, State{})
	if len(d.Conditions) != 0 || len(d.Act) != 0 {
		t.Fatalf("above the threshold: %+v", d)
	}
	d = Plan(Inputs{Now: t0, Thresholds: th, Observations: memObs(99 * mi), TransitionPeriod: time.Minute}, d.Next)
	if !reflect.DeepEqual(d.Conditions, []corev1.NodeConditionType{corev1.NodeMemoryPressure}) {
		t.Errorf("conditions = %v", d.Conditions)
	}
	if r, ok := d.Reclaim(); !ok || r.Signal != MemoryAvailable {
		t.Errorf("hard threshold met: reclaim %v %v", r, ok)
	}
	// A signal that could not be measured meets nothing.
	if d := Plan(Inputs{Now: t0, Thresholds: th, Observations: Observations{}}, State{}); len(d.Act) != 0 {
		t.Errorf("unmeasured signal acted on: %+v", d)
	}
	// Percentages are of the capacity: 10% of 4096Mi.
	pct := []Threshold{{Signal: MemoryAvailable, Value: Value{Percentage: 0.1}}}
	if d := Plan(Inputs{Now: t0, Thresholds: pct, Observations: memObs(409 * mi)}, State{}); len(d.Act) != 1 {
		t.Error("409Mi of 4096Mi is below 10%")
	}
	if d := Plan(Inputs{Now: t0, Thresholds: pct, Observations: memObs(410 * mi)}, State{}); len(d.Act) != 0 {
		t.Error("410Mi of 4096Mi is above 10%")
	}
}

// A soft threshold reports pressure at once but acts only once met for
// its whole grace period; a pass above it starts the period again.
func TestPlanSoftGracePeriod(t *testing.T) {
	th := []Threshold{{Signal: MemoryAvailable, Value: Value{Quantity: 1024 * mi}, GracePeriod: time.Minute}}
	in := func(now time.Time, avail int64) Inputs {
		return Inputs{Now: now, Thresholds: th, Observations: memObs(avail), TransitionPeriod: 5 * time.Minute}
	}
	d := Plan(in(t0, 500*mi), State{})
	if len(d.Conditions) != 1 || len(d.Act) != 0 {
		t.Fatalf("soft met at t0: conditions %v, act %v", d.Conditions, d.Act)
	}
	d = Plan(in(t0.Add(59*time.Second), 500*mi), d.Next)
	if len(d.Act) != 0 {
		t.Fatal("acted before the grace period")
	}
	d2 := Plan(in(t0.Add(time.Minute), 500*mi), d.Next)
	if len(d2.Act) != 1 || d2.Act[0].Hard() {
		t.Fatalf("grace period over: act %v", d2.Act)
	}
	// Back above the threshold: the grace period restarts.
	d = Plan(in(t0.Add(70*time.Second), 2000*mi), d.Next)
	d = Plan(in(t0.Add(80*time.Second), 500*mi), d.Next)
	d = Plan(in(t0.Add(130*time.Second), 500*mi), d.Next)
	if len(d.Act) != 0 {
		t.Error("grace period did not restart after the signal recovered")
	}
	d = Plan(in(t0.Add(140*time.Second), 500*mi), d.Next)
	if len(d.Act) != 1 {
		t.Error("grace period from the second crossing not honoured")
	}
}

func TestPlanTransitionPeriod(t *testing.T) {
	th := []Threshold{{Signal: NodeFSAvailable, Value: Value{Percentage: 0.1}}}
	fs := func(avail int64) Observations {
		return Observations{NodeFSAvailable: {Available: avail, Capacity: 1000}}
	}
	in := func(now time.Time, avail int64) Inputs {
		return Inputs{Now: now, Thresholds: th, Observations: fs(avail), TransitionPeriod: 5 * time.Minute}
	}
	d := Plan(in(t0, 50), State{})
	if !reflect.DeepEqual(d.Conditions, []corev1.NodeConditionType{corev1.NodeDiskPressure}) {
		t.Fatalf("conditions = %v", d.Conditions)
	}
	d = Plan(in(t0.Add(time.Minute), 500), d.Next)
	if len(d.Conditions) != 1 || len(d.Act) != 0 {
		t.Errorf("recovered 1m ago: conditions %v (want DiskPressure held), act %v", d.Conditions, d.Act)
	}
	d = Plan(in(t0.Add(4*time.Minute+59*time.Second), 500), d.Next)
	if len(d.Conditions) != 1 {
		t.Error("condition dropped within the transition period")
	}
	d = Plan(in(t0.Add(5*time.Minute), 500), d.Next)
	if len(d.Conditions) != 0 {
		t.Errorf("condition held past the transition period: %v", d.Conditions)
	}
	// Flapping: met again within the period keeps it from the new time.
	d = Plan(in(t0.Add(6*time.Minute), 50), d.Next)
	d = Plan(in(t0.Add(10*time.Minute), 500), d.Next)
	if len(d.Conditions) != 1 {
		t.Error("condition of the second crossing not held")
	}
}

// Once acted on, a threshold with a minimum reclaim stays met until the
// signal is that much above it.
func TestPlanMinimumReclaim(t *testing.T) {
	th := []Threshold{{Signal: MemoryAvailable, Value: Value{Quantity: 100 * mi}, MinReclaim: &Value{Quantity: 200 * mi}}}
	d := Plan(Inputs{Now: t0, Thresholds: th, Observations: memObs(50 * mi)}, State{})
	d = Plan(Inputs{Now: t0.Add(10 * time.Second), Thresholds: th, Observations: memObs(250 * mi)}, d.Next)
	if len(d.Act) != 1 {
		t.Error("250Mi < 100Mi + 200Mi minimum reclaim: still met")
	}
	d = Plan(Inputs{Now: t0.Add(20 * time.Second), Thresholds: th, Observations: memObs(300 * mi)}, d.Next)
	if len(d.Act) != 0 {
		t.Error("300Mi: minimum reclaim reached")
	}
	if StillMet(th, memObs(299*mi)) != true || StillMet(th, memObs(300*mi)) != false {
		t.Error("StillMet does not count the minimum reclaim")
	}
}

func TestPlanMemoryFirst(t *testing.T) {
	th := []Threshold{
		{Signal: NodeFSAvailable, Value: Value{Percentage: 0.1}},
		{Signal: PIDAvailable, Value: Value{Quantity: 100}},
		{Signal: MemoryAvailable, Value: Value{Quantity: 100 * mi}},
	}
	obs := Observations{NodeFSAvailable: {Available: 1, Capacity: 100}, PIDAvailable: {Available: 10, Capacity: 1000},
		MemoryAvailable: {Available: 1, Capacity: 4096 * mi}}
	d := Plan(Inputs{Now: t0, Thresholds: th, Observations: obs}, State{})
	if got, want := signals(d.Act), []string{"memory.available/hard", "nodefs.available/hard", "pid.available/hard"}; !reflect.DeepEqual(got, want) {
		t.Errorf("act order = %v, want %v", got, want)
	}
	want := []corev1.NodeConditionType{corev1.NodeDiskPressure, corev1.NodeMemoryPressure, corev1.NodePIDPressure}
	if !reflect.DeepEqual(d.Conditions, want) {
		t.Errorf("conditions = %v, want %v", d.Conditions, want)
	}
}
