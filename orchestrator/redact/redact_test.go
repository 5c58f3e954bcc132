package redact

import (
	"bytes"
	"fmt"
	"strings"
	"sync"
	"testing"
)

func TestStringScrubsKnownSecretShapes(t *testing.T) {
	for _, tc := range []struct{ in, gone, kept string }{
		{"HF_TOKEN=hf_abcdefghijklmnopqrstuvwxyz0123", "hf_abcdefghij", "HF_TOKEN="},
		{`"AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"`, "wJalrXUtnFEMI", `"AWS_SECRET_ACCESS_KEY": "`},
		{"aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "wJalrXUtnFEMI", "aws_secret_access_key = "},
		{"key AKIAIOSFODNN7EXAMPLE in use", "IOSFODNN7EXAMPLE", "key AKIA"},
		{"Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.sig", "eyJhbGci", "Authorization:"},
		{"curl -H 'authorization: token ghp_0123456789abcdefghijABCDEFGHIJ012345'", "ghp_0123456789", "authorization:"},
		{"https://alice:s3cr3t@data.example.com/set.tar", "s3cr3t", "https://" + Redacted + "@data.example.com/set.tar"},
		{"GET https://bucket.s3.amazonaws.com/w.bin?X-Amz-Signature=abc123&X-Amz-Credential=AKIA x", "abc123", "https://bucket.s3.amazonaws.com/w.bin?… x"},
		{"DB_PASSWORD=hunter22 next", "hunter22", "DB_PASSWORD=" + Redacted + " next"},
		{"-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXk\n-----END OPENSSH PRIVATE KEY-----", "b3BlbnNzaC1rZXk", Redacted},
	} {
		got := String(tc.in)
		if strings.Contains(got, tc.gone) || !strings.Contains(got, tc.kept) {
			t.Errorf("String(%q) = %q: want %q gone, %q kept", tc.in, got, tc.gone, tc.kept)
		}
	}
	// What is not a secret stays as it is: figures, NCCL's lines, names.
	for _, s := range []string{
		"   268435456      67108864     float     sum      -1   1234.5  217.50  407.81      0",
		"NCCL INFO NCCL_SOCKET_IFNAME set by environment to eth0",
		"max_tokens=100 tokenizer=gpt2 passwordless login",
		`{"nccl_version": 23007, "hostname": "gpu-01"}`,
	} {
		if got := String(s); got != s {
			t.Errorf("String(%q) = %q, want it unchanged", s, got)
		}
	}
}

func TestURLShowsNoCredentialsNorQuery(t *testing.T) {
	for in, want := range map[string]string{
		"https://u:p@host/path/file?sig=abc&se=2026": "https://host/path/file?…",
		"https://host/plain.bin":                     "https://host/plain.bin",
		"s3://bucket/prefix/":                        "s3://bucket/prefix/",
		"http://host/x?":                             "http://host/x?…",
	} {
		if got := URL(in); got != want {
			t.Errorf("URL(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestNCCLEnvKeepsOnlyWhatTheMeasurementNeeds(t *testing.T) {
	report := `{"version":2, "args":["all_reduce_perf","-b","8"], "env":["HOME=/root", "HF_TOKEN=hf_secretsecretsecretsecret", "NCCL_DEBUG=INFO", "AWS_ACCESS_KEY_ID=AKIAIOSFODNN7EXAMPLE", "CUDA_VISIBLE_DEVICES=0,1", "OMPI_COMM_WORLD_RANK=0", "NCCL_API_KEY=x"], "nccl_version":23007, "results":[{"size":8, "bus_bw": inf}]}`
	got := NCCLEnv(report)
	for _, gone := range []string{"HOME=", "HF_TOKEN", "hf_secret", "AWS_ACCESS_KEY_ID", "NCCL_API_KEY"} {
		if strings.Contains(got, gone) {
			t.Errorf("%q left in %s", gone, got)
		}
	}
	for _, kept := range []string{`"NCCL_DEBUG=INFO"`, `"CUDA_VISIBLE_DEVICES=0,1"`, `"OMPI_COMM_WORLD_RANK=0"`, `"bus_bw": inf`, `"nccl_version":23007`} {
		if !strings.Contains(got, kept) {
			t.Errorf("%q lost from %s", kept, got)
		}
	}
	if cut := NCCLEnv(`{"env":["HF_TOKEN=hf_secretsecretsecretsecret", "NCC`); strings.Contains(cut, "secret") {
		t.Errorf("a report cut short keeps %q", cut)
	}
}

func TestWriterScrubsLineByLine(t *testing.T) {
	var out bytes.Buffer
	w := Writer(&out)
	for _, chunk := range []string{"ok HF_TO", "KEN=hf_abcdefghijklmnopqrstuvwxyz012\nnext line\nlast AKIAIOSF", "ODNN7EXAMPLE"} {
		w.Write([]byte(chunk))
	}
	w.Close()
	if s := out.String(); strings.Contains(s, "hf_abcdefghij") || strings.Contains(s, "IOSFODNN7EXAMPLE") || !strings.Contains(s, "next line\n") {
		t.Errorf("%q", s)
	}
}

func TestControlsAreShownEscaped(t *testing.T) {
	for in, want := range map[string]string{
		"gpu-01\x1b]0;pwned\x07":       `gpu-01\x1b]0;pwned\a`,
		"\x1b[31mred\x1b[0m text\n":    `\x1b[31mred\x1b[0m text` + "\n",
		"tab\tok, ünïcode ok":          "tab\tok, ünïcode ok",
		"bad \xff byte, c1 \u009b, \r": `bad \xff byte, c1 \u009b, \r`,
		"rtl \u202e override":          `rtl \u202e override`,
	} {
		if got := Controls(in); got != want {
			t.Errorf("Controls(%q) = %q, want %q", in, got, want)
		}
	}
}

// BenchmarkStringPlainLog: a raw log's common case, text with no secret.
func BenchmarkStringPlainLog(b *testing.B) {
	line := "   268435456      67108864     float     sum      -1   1234.5  217.50  407.81      0   1230.1  218.22  409.16      0\n"
	s := strings.Repeat(line, 64<<10/len(line))
	b.SetBytes(int64(len(s)))
	for b.Loop() {
		String(s)
	}
}

// BenchmarkStringWithSecrets: every line holds a URL and a token.
func BenchmarkStringWithSecrets(b *testing.B) {
	line := "GET https://bucket.example.com/d.tar?X-Amz-Signature=abc HF_TOKEN=hf_abcdefghijklmnopqrstuvwxyz01\n"
	s := strings.Repeat(line, 64<<10/len(line))
	b.SetBytes(int64(len(s)))
	for b.Loop() {
		String(s)
	}
}

// Two goroutines write one log (a command's stdout and stderr): no line is
// torn or lost, and nothing races (go test -race).
func TestWriterConcurrent(t *testing.T) {
	var out bytes.Buffer
	w := Writer(&out)
	var wg sync.WaitGroup
	for g := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 2000 {
				fmt.Fprintf(w, "writer %d line %d\n", g, i)
			}
		}()
	}
	wg.Wait()
	w.Close()
	if n := strings.Count(out.String(), "\n"); n != 4000 {
		t.Errorf("%d lines, want 4000", n)
	}
}
