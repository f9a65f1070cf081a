package sdnotify

import (
	"log/slog"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// StderrIsJournal reports whether the process's stderr goes to journald:
// systemd sets JOURNAL_STREAM to the "device:inode" of the stream it
// connects stdout/stderr to. As systemd.exec(7) asks, the variable alone
// is not trusted (a child whose stderr was redirected inherits it): it
// must name the file stderr really is.
func StderrIsJournal() bool {
	var st syscall.Stat_t
	if err := syscall.Fstat(2, &st); err != nil {
		return false
	}
	return isJournalStream(os.Getenv("JOURNAL_STREAM"), uint64(st.Dev), st.Ino)
}

// isJournalStream compares JOURNAL_STREAM's value with a file's device and
// inode.
func isJournalStream(env string, dev, ino uint64) bool {
	d, i, ok := strings.Cut(env, ":")
	if !ok {
		return false
	}
	envDev, err1 := strconv.ParseUint(d, 10, 64)
	envIno, err2 := strconv.ParseUint(i, 10, 64)
	return err1 == nil && err2 == nil && envDev == dev && envIno == ino
}

// DropTime is a slog ReplaceAttr that removes the record's time, for logs
// that journald stamps itself (see StderrIsJournal).
func DropTime(groups []string, a slog.Attr) slog.Attr {
	if len(groups) == 0 && a.Key == slog.TimeKey {
		return slog.Attr{}
	}
	return a
}
