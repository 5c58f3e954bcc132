package reports

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"gpuaccept/orchestrator/record"
)

// ManifestName is the bundle's checksum list, in sha256sum's format.
const ManifestName = "MANIFEST.sha256"

// Kinds of Problem.
const (
	Changed  = "changed"  // listed, present, different content
	Missing  = "missing"  // listed, absent
	Unlisted = "unlisted" // present, not listed
)

// Problem is one file of a bundle that does not match its manifest.
type Problem struct {
	Path string `json:"path"` // relative to the bundle, with forward slashes
	Kind string `json:"kind"` // Changed, Missing or Unlisted
	Want string `json:"want,omitempty"`
	Got  string `json:"got,omitempty"`
}

func (p Problem) String() string {
	s := p.Kind + ": " + p.Path
	switch p.Kind {
	case Changed:
		s += fmt.Sprintf(" (sha256 %s, manifest says %s)", p.Got, p.Want)
	case Rendered:
		s = p.Path + ": not what run.json renders to (edited, or made by another gpuaccept version)"
	case Unlisted:
		if isReport(p.Path) {
			s += " (a report the manifest does not cover: added after, or a bundle written before gpuaccept " +
				"listed its reports, whose reports are not evidence)"
		}
	}
	return s
}

// HTMLName is the bundle's HTML report.
const HTMLName = "report.html"

// Reports are the bundle's renderings of run.json. The manifest lists
// them as it lists every file: what a buyer reads is what is signed. They
// cannot show the digest of a manifest that lists them, so they show the
// evidence digest (EvidenceDigest), of the manifest's other lines.
var Reports = []string{"report.md", HTMLName}

func isReport(f string) bool { return slices.Contains(Reports, f) }

// WriteBundle writes run.json and junit.xml into dir, next to the raw logs
// the runner left there, then report.md and report.html, which show the
// evidence digest (of the checksums of every file but them), then
// MANIFEST.sha256 over every file in dir, the reports included (so that
// `sha256sum -c MANIFEST.sha256` run in dir checks the lot). Each file is
// replaced atomically: a crash leaves the old file or the new one, never
// half of one. Signatures of an older manifest are removed: they sign
// what is no longer there.
func WriteBundle(dir string, run *record.Run) error {
	if run == nil {
		return fmt.Errorf("bundle %s: nil run", dir)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := compressLogs(dir, run); err != nil {
		return err
	}
	// One line: indenting made a 1,000-node run.json 40% larger, and
	// whoever reads it by eye has jq.
	js, err := json.Marshal(run)
	if err != nil {
		return fmt.Errorf("bundle %s: run.json: %w", dir, err)
	}
	var junit bytes.Buffer
	if err := JUnit(&junit, run); err != nil {
		return fmt.Errorf("bundle %s: %w", dir, err)
	}
	for _, f := range []struct {
		name string
		data []byte
	}{
		{"run.json", append(js, '\n')},
		{"junit.xml", junit.Bytes()},
	} {
		if err := writeAtomic(filepath.Join(dir, f.name), f.data); err != nil {
			return err
		}
	}
	if err := removeSignatures(dir); err != nil {
		return err
	}
	evidence, err := hashed(dir, func(f string) bool { return listed(f) && !isReport(f) })
	if err != nil {
		return err
	}
	bf := &BundleFacts{Evidence: evidence, Digest: EvidenceDigest(manifestOf(evidence)), Dir: dir}
	for name, data := range renderReports(run, bf) {
		if data.err != nil {
			return fmt.Errorf("bundle %s: %w", dir, data.err)
		}
		if err := writeAtomic(filepath.Join(dir, name), data.b); err != nil {
			return err
		}
	}
	all, err := hashed(dir, listed)
	if err != nil {
		return err
	}
	return writeAtomic(filepath.Join(dir, ManifestName), manifestOf(all))
}

// manifestOf is files in sha256sum's format.
func manifestOf(files []EvidenceFile) []byte {
	var m bytes.Buffer
	for _, f := range files {
		fmt.Fprintf(&m, "%s  %s\n", f.SHA256, f.Path)
	}
	return m.Bytes()
}

// EvidenceDigest is the digest the reports show: the sha256 of the
// manifest's lines but the reports' (in their order), the evidence the
// reports were rendered from.
func EvidenceDigest(manifest []byte) string {
	h := sha256.New()
	for _, l := range strings.SplitAfter(string(manifest), "\n") {
		if len(l) > 66 && isReport(strings.TrimSuffix(l[66:], "\n")) {
			continue
		}
		h.Write([]byte(l))
	}
	return hex.EncodeToString(h.Sum(nil))
}

type rendered struct {
	b   []byte
	err error
}

// renderReports is report.md and report.html of run in a bundle.
func renderReports(run *record.Run, bf *BundleFacts) map[string]rendered {
	var md, page bytes.Buffer
	mdErr := MarkdownReport(&md, run, bf)
	htmlErr := HTML(&page, run, bf)
	return map[string]rendered{"report.md": {md.Bytes(), mdErr}, HTMLName: {page.Bytes(), htmlErr}}
}

// hashed is every file of dir that keep keeps, with its checksum.
func hashed(dir string, keep func(string) bool) ([]EvidenceFile, error) {
	files, err := listFiles(dir)
	if err != nil {
		return nil, err
	}
	var out []EvidenceFile
	for _, f := range files {
		if !keep(f) {
			continue
		}
		sum, err := hashFile(dir, f)
		if err != nil {
			return nil, err
		}
		fi, err := os.Stat(filepath.Join(dir, f))
		if err != nil {
			return nil, err
		}
		out = append(out, EvidenceFile{Path: f, SHA256: sum, Bytes: fi.Size()})
	}
	return out, nil
}

// listed says whether the manifest lists f (a path relative to the
// bundle): every file but the signatures of it.
func listed(f string) bool { return !IsSignature(f) }

// removeSignatures removes every signature of dir's manifest.
func removeSignatures(dir string) error {
	sigs, err := Signatures(dir)
	if err != nil {
		return err
	}
	for _, s := range sigs {
		if err := os.Remove(filepath.Join(dir, s)); err != nil && !os.IsNotExist(err) {
			return err
		}
	}
	return nil
}

// Verify checks dir against its MANIFEST.sha256 and returns one Problem per
// changed, missing or unlisted file, sorted by path. It returns an error only
// when the manifest is missing or malformed (naming the line), or a file
// cannot be read.
func Verify(dir string) ([]Problem, error) { return VerifyAs(dir, "") }

// VerifyAs is Verify by the gpuaccept named tool (record.Run.Tool's
// form). Every file but the signatures is held to the manifest, whoever
// made the bundle, the reports included; the reports of a run that tool
// made are also rendered again from run.json and compared whole.
func VerifyAs(dir, tool string) ([]Problem, error) {
	data, err := readManifest(filepath.Join(dir, ManifestName))
	if err != nil {
		return nil, err
	}
	want, err := parseManifest(filepath.Join(dir, ManifestName), data)
	if err != nil {
		return nil, err
	}
	files, err := listFiles(dir)
	if err != nil {
		return nil, err
	}
	var problems []Problem
	for _, f := range files {
		if !listed(f) {
			continue
		}
		got, err := hashFile(dir, f)
		if err != nil {
			return nil, err
		}
		w, listed := want[f]
		delete(want, f)
		switch {
		case !listed:
			problems = append(problems, Problem{Path: f, Kind: Unlisted, Got: got})
		case w != got:
			problems = append(problems, Problem{Path: f, Kind: Changed, Want: w, Got: got})
		}
	}
	for f, w := range want { // what is left was listed but not found
		problems = append(problems, Problem{Path: f, Kind: Missing, Want: w})
	}
	rp, err := verifyReports(dir, data, tool)
	if err != nil {
		return nil, err
	}
	for _, p := range rp {
		if !slices.ContainsFunc(problems, func(q Problem) bool { return q.Path == p.Path }) {
			problems = append(problems, p)
		}
	}
	slices.SortFunc(problems, func(a, b Problem) int { return strings.Compare(a.Path, b.Path) })
	return problems, nil
}

// Rendered is the kind of Problem of a report that is not what run.json
// renders to.
const Rendered = "not run.json's rendering"

// verifyReports renders the reports again from the bundle's run.json and
// its manifest when tool made the run, and names each that differs from
// what is there. Only a like-for-like check: the manifest is what holds
// the reports, for every build (another may render differently, and the
// digest a report shows is no proof of its words). A missing report is
// the manifest's to name; a run.json that does not decode too.
func verifyReports(dir string, manifest []byte, tool string) ([]Problem, error) {
	js, err := os.ReadFile(filepath.Join(dir, "run.json"))
	if err != nil {
		return nil, nil
	}
	var run record.Run
	if json.Unmarshal(js, &run) != nil || tool == "" || run.Tool != tool {
		return nil, nil
	}
	evidence, err := hashed(dir, func(f string) bool { return listed(f) && !isReport(f) })
	if err != nil {
		return nil, err
	}
	bf := &BundleFacts{Evidence: evidence, Digest: EvidenceDigest(manifest), Dir: dir}
	var problems []Problem
	for name, want := range renderReports(&run, bf) {
		got, err := os.ReadFile(filepath.Join(dir, name))
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if want.err == nil && !bytes.Equal(got, want.b) {
			g, w := sha256.Sum256(got), sha256.Sum256(want.b)
			problems = append(problems, Problem{Path: name, Kind: Rendered, Got: hex.EncodeToString(g[:]), Want: hex.EncodeToString(w[:])})
		}
	}
	return problems, nil
}

// maxManifest bounds what verify reads as a manifest: a bundle of 1,000
// nodes lists a few MiB.
const maxManifest = 64 << 20

// readManifest reads the manifest only if it is a regular file of a
// manifest's size: a bundle is often someone else's, and a manifest that
// is a link (to /dev/zero, say) must not be followed.
func readManifest(path string) ([]byte, error) {
	st, err := os.Lstat(path)
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file (%s): a bundle's manifest is never a link or a device", path, st.Mode().Type())
	}
	if st.Size() > maxManifest {
		return nil, fmt.Errorf("%s is %d bytes, more than a manifest can be (%d)", path, st.Size(), maxManifest)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxManifest+1))
	if err == nil && len(data) > maxManifest {
		err = fmt.Errorf("%s grew past %d bytes while read", path, maxManifest)
	}
	return data, err
}

// parseManifest reads sha256sum lines ("<hex>  <path>", or " *" for binary
// mode, which sha256sum also writes) into path -> lowercase hex.
func parseManifest(name string, data []byte) (map[string]string, error) {
	bad := func(line int, format string, args ...any) error {
		return fmt.Errorf("%s line %d: %s", name, line, fmt.Sprintf(format, args...))
	}
	text, ok := strings.CutSuffix(string(data), "\n")
	if !ok || text == "" {
		return nil, fmt.Errorf("%s: empty or not ending in a newline", name)
	}
	sums := map[string]string{}
	for i, line := range strings.Split(text, "\n") {
		n := i + 1
		if len(line) < 67 || (line[64:66] != "  " && line[64:66] != " *") {
			return nil, bad(n, "want \"<sha256>  <path>\", got %q", line)
		}
		sum, path := strings.ToLower(line[:64]), line[66:]
		if _, err := hex.DecodeString(sum); err != nil {
			return nil, bad(n, "checksum %q is not hex", line[:64])
		}
		if !fs.ValidPath(path) || strings.ContainsAny(path, "\\\r") || path == ManifestName {
			return nil, bad(n, "bad path %q", path)
		}
		if _, dup := sums[path]; dup {
			return nil, bad(n, "%s listed twice", path)
		}
		sums[path] = sum
	}
	return sums, nil
}

// listFiles returns every file under dir except the manifest, relative and
// slash-separated, sorted bytewise (as `sort` in the C locale would). Only
// regular files are accepted: a link could point outside the bundle, and a
// name with a newline or backslash would need sha256sum's escaped form.
func listFiles(dir string) ([]string, error) {
	var files []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		switch {
		case rel == ManifestName:
			return nil
		case !d.Type().IsRegular():
			return fmt.Errorf("bundle %s: %s is not a regular file", dir, rel)
		case strings.ContainsAny(rel, "\\\n\r"):
			return fmt.Errorf("bundle %s: %q: name cannot be listed in a manifest", dir, rel)
		}
		files = append(files, rel)
		return nil
	})
	slices.Sort(files)
	return files, err
}

func hashFile(dir, rel string) (string, error) {
	f, err := os.Open(filepath.Join(dir, filepath.FromSlash(rel)))
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// writeAtomic replaces path with data: temp file in the same directory,
// fsync, rename, then fsync the directory so the rename itself survives a
// crash.
func writeAtomic(path string, data []byte) (err error) {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if _, err = f.Write(data); err != nil {
		return err
	}
	if err = f.Chmod(0o644); err != nil { // CreateTemp makes 0600; evidence is for reading
		return err
	}
	if err = f.Sync(); err != nil {
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	if err = os.Rename(f.Name(), path); err != nil {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
