package redact

import (
	"bytes"
	"strings"
	"testing"
)

// Every common shape a secret is printed in, with the secret's text that
// must be gone and what around it must stay (so the line still reads).
var secretShapes = []struct{ name, in, gone, kept string }{
	{"double-quoted with a space", `password="x y secret"`, "y secret", `password="` + Redacted + `"`},
	{"double-quoted with an escape", `"password": "a\"b c"`, `b c`, `"password": "` + Redacted + `"`},
	{"single-quoted python dict", `{'token': 'abc def'}`, "abc", `'token': '` + Redacted + `'`},
	{"quote left open", `password="cut short here`, "short here", `password="` + Redacted},
	{"yaml field", `db_password: hunter22`, "hunter22", "db_password: " + Redacted},
	{"flag with a space", `mysql --password hunter22 -h db`, "hunter22", "--password " + Redacted + " -h db"},
	{"flag with =", `tool --token=abcd1234 run`, "abcd1234", "--token=" + Redacted + " run"},
	{"flag quoted", `tool --api-key "k e y" run`, "k e y", `--api-key "` + Redacted + `" run`},
	{"single-dash flag", `azcopy -sas-token sv2020sig`, "sv2020sig", "-sas-token " + Redacted},
	{"redis password only", `redis://:pw0rd@cache:6379/0`, "pw0rd", "redis://" + Redacted + "@cache:6379/0"},
	{"token as the user", `git clone https://ghtoken123@github.com/o/r`, "ghtoken123", "https://" + Redacted + "@github.com/o/r"},
	{"user and password", `https://alice:s3cr3t@data.example.com/x`, "s3cr3t", "https://" + Redacted + "@data.example.com/x"},
	{"aws key id", `AKIAIOSFODNN7EXAMPLE`, "IOSFODNN7EXAMPLE", "AKIA" + Redacted},
	{"aws secret in a credentials file", `aws_secret_access_key=wJalrXUtnFEMI/K7MDENG`, "wJalrXUtnFEMI", "aws_secret_access_key=" + Redacted},
	{"aws secret as env", `AWS_SECRET_ACCESS_KEY="wJalrXUtnFEMI/K7MDENG"`, "wJalrXUtnFEMI", `AWS_SECRET_ACCESS_KEY="` + Redacted + `"`},
	{"bearer header", `Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.x.y`, "eyJhbGci", "Authorization: Bearer " + Redacted},
	{"authorization as json", `{"Authorization": "Basic dXNlcjpwYXNz"}`, "dXNlcjpwYXNz", `"Authorization": "Basic ` + Redacted},
	{"api key header", `X-Api-Key: 0123456789abcdef`, "0123456789abcdef", "X-Api-Key: " + Redacted},
	{"gitlab private token", `PRIVATE-TOKEN: glpt0123456789`, "glpt0123456789", "PRIVATE-TOKEN: " + Redacted},
	{"github token", `ghp_0123456789abcdefghijABCDEFGHIJ012345`, "0123456789abcdefghij", "gh_" + Redacted},
	{"github fine-grained", `github_pat_11ABCDEFG0123456789_abcdefghijklmnop`, "11ABCDEFG", "github_pat_" + Redacted},
	{"slack bot token", `xoxb-123456789012-abcdefghijkl`, "123456789012", "xoxb-" + Redacted},
	{"slack app token", `xapp-1-A0123456789-abcdef`, "A0123456789", "xapp-" + Redacted},
	{"slack webhook", `https://hooks.slack.com/services/T000/B000/XXXXXXXXXXXX`, "XXXXXXXXXXXX", "hooks.slack.com/services/" + Redacted},
	{"hugging face token", `hf_abcdefghijklmnopqrstuvwxyz0123`, "abcdefghijklmnop", "hf_" + Redacted},
	{"stripe key", `sk_live_0123456789abcdefghijklmn`, "0123456789abcdef", "sk_live_" + Redacted},
	{"azure sas token alone", `sv=2022-11-02&ss=b&sig=AbCdEfGh1234%2Bxyz%3D&se=2026`, "AbCdEfGh1234", "sig=" + Redacted + "&se=2026"},
	{"azure sas url", `az://acct/c/blob?sv=2022&sig=AbCdEfGh1234%2B`, "AbCdEfGh1234", "az://acct/c/blob?…"},
	{"azure connection string", `AccountName=a;AccountKey=Zm9vYmFyYmF6cXV4;EndpointSuffix=x`, "Zm9vYmFyYmF6cXV4", "AccountKey=" + Redacted},
	{"json web token", `session eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NSJ9.c2lnbmF0dXJl end`, "c2lnbmF0dXJl", "session " + Redacted + " end"},
	{"pem key", "-----BEGIN RSA PRIVATE KEY-----\nMIIEow\n-----END RSA PRIVATE KEY-----\nafter", "MIIEow", "-----BEGIN PRIVATE KEY----- " + Redacted + " -----END PRIVATE KEY-----" + "\nafter"},
	{"pem key cut short", "-----BEGIN EC PRIVATE KEY-----\nMHcCAQEE\nmore", "MHcCAQEE", "-----BEGIN PRIVATE KEY----- " + Redacted + " -----END PRIVATE KEY-----"},
}

func TestStringScrubsEveryCommonShape(t *testing.T) {
	for _, tc := range secretShapes {
		got := String(tc.in)
		if strings.Contains(got, tc.gone) || !strings.Contains(got, tc.kept) {
			t.Errorf("%s: String(%q) = %q: want %q gone, %q kept", tc.name, tc.in, got, tc.gone, tc.kept)
		}
		// A raw log sees it through a Writer, a line at a time.
		var out bytes.Buffer
		w := Writer(&out)
		w.Write([]byte("before\n" + tc.in + "\nafter\n"))
		w.Close()
		if s := out.String(); strings.Contains(s, tc.gone) || !strings.HasPrefix(s, "before\n") {
			t.Errorf("%s: through a Writer: %q", tc.name, s)
		}
	}
	// Names that only contain a secret word, and figures, stay.
	for _, s := range []string{
		"--max-tokens 100 --token-file /run/t --password-stdin",
		"num_tokens: 4096",
		"signal sig=9",
		"ssh gpu-01 hostname",
	} {
		if got := String(s); got != s {
			t.Errorf("String(%q) = %q, want it unchanged", s, got)
		}
	}
}

// A private key printed by a tool spans lines: a Writer leaves out every
// line of it, in whatever pieces it comes, and shows what follows END.
func TestWriterLeavesOutAPrivateKeyAcrossLines(t *testing.T) {
	in := "start\n-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAA\nQyNTUxOQAAACBQ\n" +
		"-----END OPENSSH PRIVATE KEY-----\nend\n"
	for _, size := range []int{1, 3, 17, len(in)} {
		var out bytes.Buffer
		w := Writer(&out)
		for i := 0; i < len(in); i += size {
			w.Write([]byte(in[i:min(i+size, len(in))]))
		}
		w.Close()
		s := out.String()
		if strings.Contains(s, "b3BlbnNzaC1r") || strings.Contains(s, "QyNTUxOQ") || s != "start\n"+"-----BEGIN PRIVATE KEY----- "+Redacted+" -----END PRIVATE KEY-----"+"\n\nend\n" {
			t.Errorf("pieces of %d: %q", size, s)
		}
	}
	// A BEGIN line that no END follows stops hiding what comes after once
	// more than any key was left out.
	var out bytes.Buffer
	w := Writer(&out)
	w.Write([]byte("-----BEGIN RSA PRIVATE KEY-----\nMIIEsecret\n"))
	w.Write(bytes.Repeat([]byte("filler line\n"), (64<<10)/12+2))
	w.Write([]byte("shown again\n"))
	w.Close()
	if s := out.String(); strings.Contains(s, "MIIEsecret") || !strings.HasSuffix(s, "shown again\n") {
		t.Errorf("no END: %.200q", s)
	}
}
