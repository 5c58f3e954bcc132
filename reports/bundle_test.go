package reports

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"gpuaccept/orchestrator/record"
)

// newBundle writes the raw logs a runner would leave, then the bundle.
func newBundle(t *testing.T) (string, *record.Run) {
	t.Helper()
	dir := t.TempDir()
	run := failedRun()
	for _, p := range run.Phases {
		if p.Log == "" {
			continue
		}
		path := filepath.Join(dir, filepath.FromSlash(p.Log))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(p.Phase+" on "+p.Node+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := WriteBundle(dir, run); err != nil {
		t.Fatal(err)
	}
	return dir, run
}

func verify(t *testing.T, dir string) []Problem {
	t.Helper()
	problems, err := Verify(dir)
	if err != nil {
		t.Fatal(err)
	}
	return problems
}

// Nothing a buyer reads is outside the manifest: a signed bundle whose
// report said "NOT ACCEPTED" edited to "ACCEPTED" verified as intact under
// another gpuaccept build, which held the reports only to naming the
// manifest's digest. Now the manifest lists the reports, and every build
// names the edited one: this one (which also renders it again) and
// another (simulated by the tool name the check keys on).
func TestEditedReportFailsUnderEveryBuild(t *testing.T) {
	for _, name := range Reports {
		for _, tool := range []string{"gpuaccept v0.1.0", "gpuaccept v9.9.9-another-build", ""} {
			dir, _ := newBundle(t)
			path := filepath.Join(dir, name)
			orig, _ := os.ReadFile(path)
			edited := bytes.Replace(orig, []byte("NOT ACCEPTED"), []byte("ACCEPTED"), 1)
			if bytes.Equal(edited, orig) {
				t.Fatalf("%s does not say NOT ACCEPTED", name)
			}
			os.WriteFile(path, edited, 0o644)
			p, err := VerifyAs(dir, tool)
			if err != nil || len(p) != 1 || p[0].Path != name || p[0].Kind != Changed {
				t.Errorf("%s edited, verified by %q: %v, %v; want it named changed", name, tool, p, err)
			}
			os.Remove(path)
			if p, err := VerifyAs(dir, tool); err != nil || len(p) != 1 || p[0].Path != name || p[0].Kind != Missing {
				t.Errorf("%s removed, verified by %q: %v, %v; want it named missing", name, tool, p, err)
			}
		}
	}
	// A file the manifest does not list, whatever its name, is named.
	dir, _ := newBundle(t)
	os.WriteFile(filepath.Join(dir, "report-final.md"), []byte("ACCEPTED\n"), 0o644)
	if p := verify(t, dir); len(p) != 1 || p[0].Path != "report-final.md" || p[0].Kind != Unlisted {
		t.Errorf("an unlisted file: %v", p)
	}
}

// A bundle written before the manifest listed the reports: its reports
// are not covered, and every build says so rather than call it intact.
func TestReportsOutsideTheManifestAreNamed(t *testing.T) {
	dir, _ := newBundle(t)
	mpath := filepath.Join(dir, ManifestName)
	m, _ := os.ReadFile(mpath)
	var old []string
	for _, l := range strings.SplitAfter(string(m), "\n") {
		if l != "" && !slices.Contains(Reports, strings.TrimSuffix(l[66:], "\n")) {
			old = append(old, l)
		}
	}
	os.WriteFile(mpath, []byte(strings.Join(old, "")), 0o644)
	for _, tool := range []string{"gpuaccept v0.1.0", "gpuaccept another"} {
		p, err := VerifyAs(dir, tool)
		if err != nil || len(p) != 2 || p[0].Kind != Unlisted || p[1].Kind != Unlisted ||
			!strings.Contains(p[0].String(), "a report the manifest does not cover") {
			t.Errorf("verified by %q: %v, %v", tool, p, err)
		}
	}
}

// The reports show the evidence digest, of the manifest's lines but
// theirs; verify by the build that made the run renders them again and
// names one that is not run.json's rendering, even with a manifest
// rewritten to match it.
func TestReportsAreRenderingsOfTheEvidence(t *testing.T) {
	dir, _ := newBundle(t)
	mpath := filepath.Join(dir, ManifestName)
	m, _ := os.ReadFile(mpath)
	digest := EvidenceDigest(m)
	for _, r := range Reports {
		b, _ := os.ReadFile(filepath.Join(dir, r))
		if !bytes.Contains(b, []byte(digest)) {
			t.Errorf("%s does not show the evidence digest %s", r, digest)
		}
	}
	md := filepath.Join(dir, "report.md")
	orig, _ := os.ReadFile(md)
	edited := bytes.Replace(orig, []byte("NOT ACCEPTED"), []byte("ACCEPTED"), 1)
	os.WriteFile(md, edited, 0o644)
	was, now := sha256.Sum256(orig), sha256.Sum256(edited)
	os.WriteFile(mpath, bytes.Replace(m, []byte(hex.EncodeToString(was[:])), []byte(hex.EncodeToString(now[:])), 1), 0o644)
	if p, err := VerifyAs(dir, "gpuaccept v0.1.0"); err != nil || len(p) != 1 || p[0].Path != "report.md" || p[0].Kind != Rendered {
		t.Errorf("an edited report.md, manifest rewritten: %v, %v", p, err)
	}
}

func TestBundleClean(t *testing.T) {
	dir, run := newBundle(t)
	if p := verify(t, dir); len(p) != 0 {
		t.Fatalf("fresh bundle: %v", p)
	}

	// Exactly the expected files: no temp file left behind.
	var got []string
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(dir, p)
			got = append(got, filepath.ToSlash(rel))
		}
		return err
	})
	want := []string{ManifestName, "junit.xml", "report.md", HTMLName, "run.json"}
	for _, p := range run.Phases {
		if p.Log != "" {
			want = append(want, p.Log)
		}
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("files:\n got %v\nwant %v", got, want)
	}

	// The manifest lists every other file, the reports too, sorted.
	m, err := os.ReadFile(filepath.Join(dir, ManifestName))
	if err != nil {
		t.Fatal(err)
	}
	var listed []string
	for _, line := range strings.Split(strings.TrimSuffix(string(m), "\n"), "\n") {
		listed = append(listed, line[66:])
	}
	if !slices.IsSorted(listed) || len(listed) != len(want)-1 || !slices.Contains(listed, "report.md") || !slices.Contains(listed, HTMLName) {
		t.Errorf("manifest lists %v", listed)
	}

	// run.json is the run, whole.
	js, err := os.ReadFile(filepath.Join(dir, "run.json"))
	if err != nil {
		t.Fatal(err)
	}
	var back record.Run
	if err := json.Unmarshal(js, &back); err != nil {
		t.Fatal(err)
	}
	wantJS, _ := json.Marshal(run)
	gotJS, _ := json.Marshal(&back)
	if string(wantJS) != string(gotJS) {
		t.Errorf("run.json does not round-trip:\n%s\n%s", gotJS, wantJS)
	}

	// Rewriting a bundle (e.g. after resume) leaves it clean.
	if err := WriteBundle(dir, run); err != nil {
		t.Fatal(err)
	}
	if p := verify(t, dir); len(p) != 0 {
		t.Fatalf("rewritten bundle: %v", p)
	}
}

// The raw logs go in compressed, listed in the manifest, the record
// pointing at them; a window resumed after its bundle was written adds to
// a log, whose compressed copy then reads as the whole.
func TestBundleCompressesRawLogs(t *testing.T) {
	dir := t.TempDir()
	run := fullRun()
	log := filepath.Join(dir, "raw", "gpu-01", "preflight.log")
	os.MkdirAll(filepath.Dir(log), 0o755)
	os.WriteFile(log, []byte(strings.Repeat("GPU 0: NVIDIA H100 80GB HBM3\n", 1000)), 0o644)
	if err := WriteBundle(dir, run); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(log); !os.IsNotExist(err) {
		t.Errorf("the plain log is still there: %v", err)
	}
	st, err := os.Stat(log + ".gz")
	if err != nil || st.Size() > 2000 {
		t.Fatalf("compressed log: %v %v", st, err)
	}
	for _, p := range run.Phases {
		if p.Node == "gpu-01" && p.Phase == "preflight" && p.Log != "raw/gpu-01/preflight"+LogSuffix {
			t.Errorf("the record points at %s", p.Log)
		}
	}
	m, _ := os.ReadFile(filepath.Join(dir, ManifestName))
	if !strings.Contains(string(m), "  raw/gpu-01/preflight"+LogSuffix+"\n") {
		t.Errorf("manifest:\n%s", m)
	}
	os.WriteFile(log, []byte("resumed\n"), 0o644)
	if err := WriteBundle(dir, run); err != nil {
		t.Fatal(err)
	}
	r, err := OpenLog(log + ".gz")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	b, _ := io.ReadAll(r)
	if !strings.HasPrefix(string(b), "GPU 0: ") || !strings.HasSuffix(string(b), "HBM3\nresumed\n") {
		t.Errorf("the resumed log reads %d bytes ending %q", len(b), b[max(0, len(b)-40):])
	}
	if p := verify(t, dir); len(p) != 0 {
		t.Errorf("bundle: %v", p)
	}
}

func TestBundleProblems(t *testing.T) {
	tests := []struct {
		name   string
		tamper func(t *testing.T, dir string)
		want   Problem
	}{
		{"changed", func(t *testing.T, dir string) {
			path := filepath.Join(dir, "raw", "gpu-02", "preflight"+LogSuffix)
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			b[0] ^= 1
			if err := os.WriteFile(path, b, 0o644); err != nil {
				t.Fatal(err)
			}
		}, Problem{Path: "raw/gpu-02/preflight" + LogSuffix, Kind: Changed}},
		{"missing", func(t *testing.T, dir string) {
			if err := os.Remove(filepath.Join(dir, "junit.xml")); err != nil {
				t.Fatal(err)
			}
		}, Problem{Path: "junit.xml", Kind: Missing}},
		{"unlisted", func(t *testing.T, dir string) {
			if err := os.WriteFile(filepath.Join(dir, "raw", "gpu-01", "extra.log"), []byte("x"), 0o644); err != nil {
				t.Fatal(err)
			}
		}, Problem{Path: "raw/gpu-01/extra.log", Kind: Unlisted}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir, _ := newBundle(t)
			tt.tamper(t, dir)
			p := verify(t, dir)
			if len(p) != 1 || p[0].Path != tt.want.Path || p[0].Kind != tt.want.Kind {
				t.Fatalf("got %v, want one %s %s", p, tt.want.Kind, tt.want.Path)
			}
			if tt.want.Kind == Changed && (p[0].Want == "" || p[0].Got == "" || p[0].Want == p[0].Got) {
				t.Errorf("changed without both checksums: %+v", p[0])
			}
			if !strings.Contains(p[0].String(), tt.want.Path) {
				t.Errorf("String() does not name the file: %s", p[0])
			}
		})
	}
}

func TestVerifyBadManifest(t *testing.T) {
	dir, _ := newBundle(t)
	path := filepath.Join(dir, ManifestName)
	orig, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(string(orig), "\n")
	dup := slices.Clone(lines)
	dup[2] = dup[1]
	for _, tt := range []struct {
		name, manifest, want string
	}{
		{"bad hex", lines[0] + "zz" + lines[1][2:] + strings.Join(lines[2:], ""), "line 2"},
		{"no separator", lines[0] + lines[1][:64] + " " + lines[1][66:] + strings.Join(lines[2:], ""), "line 2"},
		{"escaping path", strings.Join(lines[:2], "") + lines[2][:66] + "../etc/passwd\n" + strings.Join(lines[3:], ""), "line 3"},
		{"duplicate", strings.Join(dup, ""), "line 3"},
		{"empty", "", ManifestName},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if err := os.WriteFile(path, []byte(tt.manifest), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := Verify(dir)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got error %v, want one naming %q", err, tt.want)
			}
		})
	}

	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if _, err := Verify(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("missing manifest: got %v", err)
	}
}

// The manifest must be usable without gpuaccept: plain sha256sum -c.
func TestManifestSha256sum(t *testing.T) {
	bin, err := exec.LookPath("sha256sum")
	if err != nil {
		t.Skip("sha256sum not installed")
	}
	dir, _ := newBundle(t)
	cmd := exec.Command(bin, "--strict", "-c", ManifestName)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("sha256sum -c: %v\n%s", err, out)
	}
}

func TestBundleRejectsLinks(t *testing.T) {
	dir, run := newBundle(t)
	if err := os.Symlink("/etc/hostname", filepath.Join(dir, "raw", "link.log")); err != nil {
		t.Skip(err)
	}
	if err := WriteBundle(dir, run); err == nil || !strings.Contains(err.Error(), "raw/link.log") {
		t.Fatalf("got %v, want an error naming raw/link.log", err)
	}
}

// TestVerifyDoesNotFollowAManifestLink: a bundle is often someone else's;
// a MANIFEST that is a link (to /dev/zero it ran verify out of memory) or
// a giant file is refused, not read.
func TestVerifyDoesNotFollowAManifestLink(t *testing.T) {
	dir, _ := newBundle(t)
	m := filepath.Join(dir, ManifestName)
	if err := os.Remove(m); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/dev/zero", m); err != nil {
		t.Fatal(err)
	}
	if _, err := Verify(dir); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Fatalf("a manifest linked to /dev/zero: %v", err)
	}
	os.Remove(m)
	f, err := os.Create(m)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(maxManifest + 1); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if _, err := Verify(dir); err == nil || !strings.Contains(err.Error(), "more than a manifest can be") {
		t.Fatalf("a manifest of %d bytes: %v", maxManifest+1, err)
	}
}
