package redact

import (
	"bytes"
	"strings"
	"testing"
)

// planted are ways a secret value v is printed; each returns the line and
// the part of it that must not survive.
var planted = []func(v string) (line, secret string){
	func(v string) (string, string) { return "HF_TOKEN=hf_" + v, v },
	func(v string) (string, string) { return `password="x ` + v + `"`, v },
	func(v string) (string, string) { return `{'token': '` + v + ` y'}`, v },
	func(v string) (string, string) { return `"api_key": "` + v + `"`, v },
	func(v string) (string, string) { return "cmd --password " + v + " --next", v },
	func(v string) (string, string) { return "cmd --token=" + v, v },
	func(v string) (string, string) { return "redis://:" + v + "@cache:6379", v },
	func(v string) (string, string) { return "https://" + v + "@git.example.com/r", v },
	func(v string) (string, string) { return "https://user:" + v + "@h.example.com/", v },
	func(v string) (string, string) {
		return "key " + "AKIA" + strings.ToUpper(v[:16]) + " used", strings.ToUpper(v[:16])
	},
	func(v string) (string, string) { return "Authorization: Bearer " + v, v },
	func(v string) (string, string) { return "ghp_" + v, v },
	func(v string) (string, string) { return "xoxb-" + v, v },
	func(v string) (string, string) { return "GET https://acct.blob.core.windows.net/c/b?sv=1&sig=" + v, v },
	func(v string) (string, string) { return "--sas 'sv=2022&sig=" + v + "'", v },
	func(v string) (string, string) {
		return "-----BEGIN RSA PRIVATE KEY-----\n" + v + "\n" + v + "\n-----END RSA PRIVATE KEY-----", v
	},
}

// FuzzString: the scrubber never panics, what it returns is bounded by
// what it was given and stays as it is when scrubbed again, and a secret
// planted among any text, in any of the shapes above, never survives,
// neither String nor a Writer fed in pieces.
func FuzzString(f *testing.F) {
	for i, tc := range secretShapes {
		f.Add(tc.in, "after: "+tc.gone, uint8(i), "0123456789abcdefghijKLMNOP", uint8(i+1))
	}
	f.Add("authorization:", "bearer", uint8(4), "zzzzzzzzzzzzzzzzzzzzzzzzz", uint8(3))
	f.Add(`password="`, "-----BEGIN X PRIVATE KEY-----", uint8(15), "Qq1Qq1Qq1Qq1Qq1Qq1Qq1Qq1", uint8(0))
	f.Fuzz(func(t *testing.T, before, after string, shape uint8, value string, piece uint8) {
		out := String(before)
		if len(out) > 4*len(before)+len(pemRedacted) {
			t.Fatalf("String grew %d bytes to %d", len(before), len(out))
		}
		if again := String(out); again != out {
			t.Fatalf("scrubbing again changes it: %q -> %q", out, again)
		}
		v := alnum(value)
		if strings.Contains(before, v) || strings.Contains(after, v) || strings.Contains(strings.ToUpper(before+after), strings.ToUpper(v[:16])) {
			return
		}
		line, secret := planted[int(shape)%len(planted)](v)
		in := before + "\n" + line + "\n" + after
		if got := String(in); strings.Contains(got, secret) {
			t.Fatalf("planted %q survives String: %q", line, got)
		}
		var buf bytes.Buffer
		w := Writer(&buf)
		size := int(piece)%64 + 1
		for i := 0; i < len(in); i += size {
			w.Write([]byte(in[i:min(i+size, len(in))]))
		}
		w.Close()
		if strings.Contains(buf.String(), secret) {
			t.Fatalf("planted %q survives a Writer (pieces of %d): %q", line, size, buf.String())
		}
	})
}

// alnum is s made a secret-looking value: letters and digits only, 20 to
// 40 of them.
func alnum(s string) string {
	const set = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	b := []byte(s)
	for len(b) < 20 {
		b = append(b, byte(len(b)*7+3))
	}
	b = b[:min(len(b), 40)]
	for i, c := range b {
		b[i] = set[(int(c)+i)%len(set)]
	}
	return string(b)
}
