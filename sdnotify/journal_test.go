package sdnotify

import (
	"log/slog"
	"strings"
	"testing"
	"time"
)

func TestIsJournalStream(t *testing.T) {
	for _, tc := range []struct {
		env      string
		dev, ino uint64
		want     bool
	}{
		{"", 8, 42, false},
		{"8:42", 8, 42, true},
		{"8:42", 8, 43, false}, // inherited, but stderr was redirected
		{"9:42", 8, 42, false},
		{"8", 8, 42, false},
		{"8:42x", 8, 42, false},
		{"x:42", 8, 42, false},
	} {
		if got := isJournalStream(tc.env, tc.dev, tc.ino); got != tc.want {
			t.Errorf("isJournalStream(%q, %d, %d) = %v, want %v", tc.env, tc.dev, tc.ino, got, tc.want)
		}
	}
}

// Under go test stderr is not a journal stream, whatever the environment.
func TestStderrIsJournalNeedsTheRealStream(t *testing.T) {
	t.Setenv("JOURNAL_STREAM", "1:1")
	if StderrIsJournal() {
		t.Error("StderrIsJournal = true for a JOURNAL_STREAM that is not stderr")
	}
}

func TestDropTime(t *testing.T) {
	var b strings.Builder
	log := slog.New(slog.NewTextHandler(&b, &slog.HandlerOptions{ReplaceAttr: DropTime}))
	log.WithGroup("g").Info("hello", "time", time.Unix(0, 0).UTC(), "k", "v")
	got := strings.TrimSpace(b.String())
	if want := `level=INFO msg=hello g.time=1970-01-01T00:00:00.000Z g.k=v`; got != want {
		t.Errorf("log line = %q, want %q", got, want)
	}
}
