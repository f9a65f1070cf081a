package controlplane

import (
	"errors"
	"io"
	"os"

	"gopkg.in/natefinch/lumberjack.v2"

	"github.com/nodelet/nodelet/controlplane/apiserver"
)

// auditor is the audit log of upstream's flags: the policy file, and the
// log file ("-" for standard output) rotated by size, count and age with
// lumberjack, as kube-apiserver rotates it. Neither flag: no audit.
func (c *ControlPlane) auditor() (*apiserver.Auditor, io.Closer, error) {
	a := c.cfg.Audit
	switch {
	case a.PolicyFile == "" && a.LogPath == "":
		return nil, nil, nil
	case a.PolicyFile == "" || a.LogPath == "":
		return nil, nil, errors.New("audit: --audit-policy-file and --audit-log-path go together")
	}
	var out io.WriteCloser = nopCloser{os.Stdout}
	if a.LogPath != "-" {
		out = &lumberjack.Logger{Filename: a.LogPath, MaxSize: a.MaxSizeMB, MaxBackups: a.MaxBackups, MaxAge: a.MaxAgeDays}
	}
	auditor, err := apiserver.NewAuditor(a.PolicyFile, out)
	if err != nil {
		out.Close()
		return nil, nil, err
	}
	return auditor, out, nil
}

type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }
