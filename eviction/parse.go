package eviction

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
)

// DefaultHard is upstream's --eviction-hard default (Linux) and
// pid.available<10%, which upstream leaves out: a node whose pods (without
// --pod-max-pids) exhaust the host's process IDs reports PIDPressure and
// evicts the pod of the most processes (of the lowest priority) before the
// host can no longer fork.
const DefaultHard = "memory.available<100Mi,nodefs.available<10%,nodefs.inodesFree<5%,imagefs.available<15%,pid.available<10%"

// DefaultPressureTransitionPeriod is upstream's
// --eviction-pressure-transition-period default.
const DefaultPressureTransitionPeriod = 5 * time.Minute

// DefaultMonitoringInterval is upstream's eviction monitoring period (the
// kubelet's housekeeping interval).
const DefaultMonitoringInterval = 10 * time.Second

// DefaultThresholds are the thresholds of DefaultHard.
func DefaultThresholds() []Threshold {
	t, err := ParseStatements(DefaultHard)
	if err != nil {
		panic(err) // a constant
	}
	return t
}

// ParseStatements parses --eviction-hard or --eviction-soft:
// "memory.available<100Mi,nodefs.available<10%". A value of 0, 0% or
// 100% disables the signal, as upstream; "" gives no thresholds.
func ParseStatements(s string) ([]Threshold, error) {
	pairs, err := splitPairs(s, "<")
	if err != nil {
		return nil, err
	}
	var out []Threshold
	for _, p := range pairs {
		sig, err := parseSignal(p.key)
		if err != nil {
			return nil, err
		}
		v, err := parseValue(sig, p.value)
		if err != nil {
			return nil, err
		}
		if (v.Quantity == 0 && v.Percentage == 0) || v.Percentage == 1 {
			continue // upstream: 0, 0% or 100% disables the signal
		}
		out = append(out, Threshold{Signal: sig, Value: v})
	}
	return out, nil
}

// ParseGracePeriods parses --eviction-soft-grace-period:
// "memory.available=1m30s,nodefs.available=2m".
func ParseGracePeriods(s string) (map[Signal]time.Duration, error) {
	pairs, err := splitPairs(s, "=")
	if err != nil {
		return nil, err
	}
	out := map[Signal]time.Duration{}
	for _, p := range pairs {
		sig, err := parseSignal(p.key)
		if err != nil {
			return nil, err
		}
		d, err := time.ParseDuration(p.value)
		if err != nil {
			return nil, fmt.Errorf("grace period of %s: %w", sig, err)
		}
		if d < 0 {
			return nil, fmt.Errorf("grace period of %s: %s is negative", sig, p.value)
		}
		out[sig] = d
	}
	return out, nil
}

// ParseMinimumReclaims parses --eviction-minimum-reclaim:
// "memory.available=0Mi,nodefs.available=500Mi,imagefs.available=2Gi".
func ParseMinimumReclaims(s string) (map[Signal]Value, error) {
	pairs, err := splitPairs(s, "=")
	if err != nil {
		return nil, err
	}
	out := map[Signal]Value{}
	for _, p := range pairs {
		sig, err := parseSignal(p.key)
		if err != nil {
			return nil, err
		}
		v, err := parseValue(sig, p.value)
		if err != nil {
			return nil, fmt.Errorf("minimum reclaim: %w", err)
		}
		out[sig] = v
	}
	return out, nil
}

// Combine makes the thresholds of the four flags: every soft threshold
// needs a grace period (upstream refuses one without), and minimum
// reclaims attach to both the hard and the soft threshold of their signal.
// Grace periods must be > 0, else a soft threshold would act as a hard one.
func Combine(hard, soft []Threshold, grace map[Signal]time.Duration, minReclaim map[Signal]Value) ([]Threshold, error) {
	if err := noDuplicates(hard); err != nil {
		return nil, fmt.Errorf("hard thresholds: %w", err)
	}
	if err := noDuplicates(soft); err != nil {
		return nil, fmt.Errorf("soft thresholds: %w", err)
	}
	out := append([]Threshold{}, hard...) // never nil: nil means the defaults to nodelet.Config
	for _, t := range soft {
		d, ok := grace[t.Signal]
		if !ok {
			return nil, fmt.Errorf("grace period must be specified for the soft eviction threshold %s (--eviction-soft-grace-period)", t.Signal)
		}
		if d <= 0 {
			return nil, fmt.Errorf("grace period of the soft eviction threshold %s must be positive", t.Signal)
		}
		t.GracePeriod = d
		out = append(out, t)
	}
	for i := range out {
		if v, ok := minReclaim[out[i].Signal]; ok {
			out[i].MinReclaim = &v
		}
	}
	return out, nil
}

func noDuplicates(ts []Threshold) error {
	seen := map[Signal]bool{}
	for _, t := range ts {
		if seen[t.Signal] {
			return fmt.Errorf("found duplicate eviction threshold for signal %s", t.Signal)
		}
		seen[t.Signal] = true
	}
	return nil
}

type pair struct{ key, value string }

// splitPairs splits "k<v,k2<v2" (sep "<") or "k=v,k2=v2" as upstream's
// map flags do.
func splitPairs(s, sep string) ([]pair, error) {
	var out []pair
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		k, v, ok := strings.Cut(item, sep)
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if !ok || k == "" || v == "" {
			return nil, fmt.Errorf("malformed pair %q, expect signal%svalue", item, sep)
		}
		out = append(out, pair{k, v})
	}
	return out, nil
}

func parseSignal(s string) (Signal, error) {
	sig := Signal(s)
	if _, ok := signalResource[sig]; !ok {
		return "", fmt.Errorf("unsupported eviction signal %q", s)
	}
	return sig, nil
}

// parseValue reads "10%" or a quantity ("100Mi", "1000" inodes or pids).
func parseValue(sig Signal, s string) (Value, error) {
	if num, ok := strings.CutSuffix(s, "%"); ok {
		p, err := strconv.ParseFloat(num, 64)
		if err != nil {
			return Value{}, fmt.Errorf("eviction threshold %s: %q is not a percentage", sig, s)
		}
		if p < 0 || p > 100 {
			return Value{}, fmt.Errorf("eviction percentage threshold %s must be >= 0%% and <= 100%%: %s", sig, s)
		}
		return Value{Percentage: p / 100}, nil
	}
	q, err := resource.ParseQuantity(s)
	if err != nil {
		return Value{}, fmt.Errorf("eviction threshold %s: %q: %w", sig, s, err)
	}
	if q.Sign() < 0 {
		return Value{}, fmt.Errorf("eviction threshold %s cannot be negative: %s", sig, s)
	}
	return Value{Quantity: q.Value()}, nil
}
