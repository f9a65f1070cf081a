package containerlogs

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func TestCRIStream(t *testing.T) {
	long := strings.Repeat("x", maxLine+10)
	tests := []struct {
		name   string
		writes []string
		want   []string // entries after Close, without timestamps
	}{
		{"whole lines", []string{"a\nb\n"}, []string{"stdout F a", "stdout F b"}},
		{"split writes", []string{"he", "llo\nwor", "ld\n"}, []string{"stdout F hello", "stdout F world"}},
		{"unterminated last line", []string{"a\nb"}, []string{"stdout F a", "stdout P b"}},
		{"empty line", []string{"\n"}, []string{"stdout F "}},
		{"crlf", []string{"a\r\n"}, []string{"stdout F a"}},
		{"long line", []string{long + "\n"}, []string{"stdout P " + long[:maxLine], "stdout F " + long[maxLine:]}},
		{"long unterminated", []string{long}, []string{"stdout P " + long[:maxLine], "stdout P " + long[maxLine:]}},
	}
	ts := time.Date(2024, 1, 2, 3, 4, 5, 6, time.UTC)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			s := NewCRI(&buf, func() time.Time { return ts }).Stream("stdout")
			for _, w := range tt.writes {
				if n, err := s.Write([]byte(w)); err != nil || n != len(w) {
					t.Fatalf("Write = %d, %v", n, err)
				}
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, line := range strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n") {
				stamp, rest, _ := strings.Cut(line, " ")
				if stamp != "2024-01-02T03:04:05.000000006Z" {
					t.Errorf("timestamp %q", stamp)
				}
				got = append(got, rest)
			}
			if strings.Join(got, "|") != strings.Join(tt.want, "|") {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}
