package standins

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// The demo's container runtime (demo only, like the fabric model): `podman load`, `podman image inspect` and
// `podman run` against a per-node image store in a directory, in podman 4.3's words (captured from podman 4.3.1
// loading the lab's test image: the progress lines on stderr, "Loaded image: NAME" on stdout, inspect's JSON
// with its five-space indent, "Error: ...: image not known" with exit 125). It reads real docker-archive and
// oci-archive files and derives everything it prints from them: the image ID is the sha256 of the archive's
// config, as podman's is. `run` starts no container: it runs the command on the node itself (the node's
// stand-in nvidia-smi), and only when GPUs were asked for (--device nvidia.com/gpu=... or --gpus) can the
// container see nvidia-smi, as with the real CDI devices.

// Podman is the runtime's command name.
const Podman = "podman"

// PodmanStoreEnv names the directory that holds the node's loaded images (one JSON file per image).
const PodmanStoreEnv = "GPUACCEPT_STANDIN_PODMAN_STORE"

// InstallPodman writes the podman wrapper into dir (demo only; the lab runs the real podman).
func InstallPodman(dir string, argv0 []string) error {
	if err := checkArgv0(argv0); err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("standins: InstallPodman: %w", err)
	}
	return writeWrapper(filepath.Join(dir, Podman), "podman (simulated container runtime, demo only)", append(append([]string{}, argv0...), Podman))
}

// storedImage is one loaded image in the store.
type storedImage struct {
	ID           string          `json:"id"`
	Digest       string          `json:"digest"`
	Names        []string        `json:"names"`
	Config       json.RawMessage `json:"config"`
	Layers       []string        `json:"layers"` // diff IDs
	Size         int64           `json:"size"`
	ManifestType string          `json:"manifest_type"`
}

// PodmanMain answers one podman invocation; env is the process environment (for PodmanStoreEnv and PATH).
func PodmanMain(args []string, env []string, stdout, stderr io.Writer) int {
	store := lookupEnv(env, PodmanStoreEnv)
	if store == "" {
		fmt.Fprintf(stderr, "gpuaccept standin: podman: %s is not set\n", PodmanStoreEnv)
		return ExitNotSimulated
	}
	switch {
	case len(args) >= 1 && args[0] == "load":
		return podmanLoad(store, args[1:], stdout, stderr)
	case len(args) >= 2 && args[0] == "image" && args[1] == "inspect":
		return podmanInspect(store, args[2:], stdout, stderr)
	case len(args) >= 1 && args[0] == "run" && runDetached(args[1:]):
		return podmanRunDetached(store, args[1:], env, stdout, stderr)
	case len(args) >= 1 && args[0] == "run":
		return podmanRun(store, args[1:], env, stdout, stderr)
	case len(args) == 2 && args[0] == podmanMonitorVerb:
		return podmanMonitor(store, args[1], env)
	case len(args) >= 1 && args[0] == "ps":
		return podmanPs(store, args[1:], stdout, stderr)
	case len(args) >= 1 && args[0] == "logs":
		return podmanLogs(store, args[1:], stdout, stderr)
	case len(args) >= 1 && args[0] == "stop":
		return podmanStop(store, args[1:], stdout, stderr)
	case len(args) >= 1 && args[0] == "kill":
		return podmanKill(store, args[1:], stdout, stderr)
	case len(args) >= 1 && args[0] == "rm":
		return podmanRm(store, args[1:], stdout, stderr)
	case len(args) >= 1 && args[0] == "inspect":
		return podmanInspectAny(store, args[1:], stdout, stderr)
	case len(args) >= 2 && args[0] == "container" && args[1] == "inspect":
		return podmanInspectAny(store, args[2:], stdout, stderr)
	case len(args) == 3 && args[0] == "images" && args[1] == "-q" && args[2] == "--no-trunc":
		return podmanImages(store, stdout)
	case len(args) >= 1 && args[0] == "rmi":
		return podmanRmi(store, args[1:], stdout, stderr)
	}
	fmt.Fprintf(stderr, "gpuaccept standin: podman %s is not simulated (load, image inspect, run [-d], images -q --no-trunc, rmi, ps, logs, stop, kill, rm, inspect are)\n", strings.Join(args, " "))
	return ExitNotSimulated
}

func lookupEnv(env []string, key string) string {
	for i := len(env) - 1; i >= 0; i-- {
		if v, ok := strings.CutPrefix(env[i], key+"="); ok {
			return v
		}
	}
	return ""
}

func podmanLoad(store string, args []string, stdout, stderr io.Writer) int {
	var input string
	quiet := false
	for i := 0; i < len(args); i++ {
		switch a := args[i]; {
		case (a == "-i" || a == "--input") && i+1 < len(args):
			input = args[i+1]
			i++
		case strings.HasPrefix(a, "--input="):
			input = strings.TrimPrefix(a, "--input=")
		case a == "-q" || a == "--quiet":
			quiet = true
		default:
			fmt.Fprintf(stderr, "Error: unknown flag: %s\nSee 'podman load --help'\n", a)
			return 125
		}
	}
	if input == "" {
		// podman reads stdin then; the demo never does that.
		fmt.Fprintf(stderr, "gpuaccept standin: podman load without -i is not simulated\n")
		return ExitNotSimulated
	}
	img, err := readArchive(input)
	if err != nil {
		fmt.Fprintf(stderr, "Error: payload does not match any of the supported image formats:\n * docker-archive: %v\n * oci-archive: %v\n", err, err)
		return 125
	}
	if !quiet {
		fmt.Fprintln(stderr, "Getting image source signatures")
		for _, l := range img.Layers {
			fmt.Fprintf(stderr, "Copying blob %s\n", l)
		}
		fmt.Fprintf(stderr, "Copying config sha256:%s\nWriting manifest to image destination\nStoring signatures\n", img.ID)
	}
	if err := saveImage(store, img); err != nil {
		fmt.Fprintf(stderr, "Error: %v\n", err)
		return 125
	}
	names := img.Names
	if len(names) == 0 {
		names = []string{"sha256:" + img.ID}
	}
	fmt.Fprintln(stdout, "Loaded image: "+strings.Join(names, "\nLoaded image: "))
	return 0
}

// readArchive reads a docker-archive (manifest.json) or an oci-archive (index.json) and its config.
func readArchive(path string) (*storedImage, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("opening %s: %w", path, err)
	}
	defer f.Close()
	files := map[string][]byte{}
	sizes := map[string]int64{}
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("loading tar component: %w", err)
		}
		name := strings.TrimPrefix(h.Name, "./")
		sizes[name] = h.Size
		// Metadata only: layers are counted, not kept.
		if name == "manifest.json" || name == "index.json" || h.Size <= 1<<20 {
			b, err := io.ReadAll(tr)
			if err != nil {
				return nil, fmt.Errorf("reading %s: %w", name, err)
			}
			files[name] = b
		}
	}
	img := &storedImage{}
	var config []byte
	switch {
	case files["manifest.json"] != nil:
		var m []struct {
			Config   string
			RepoTags []string
			Layers   []string
		}
		if err := json.Unmarshal(files["manifest.json"], &m); err != nil || len(m) == 0 {
			return nil, fmt.Errorf("loading tar component manifest.json: not a docker-archive manifest")
		}
		config = files[m[0].Config]
		for _, t := range m[0].RepoTags {
			img.Names = append(img.Names, normalizeName(t))
		}
		for _, l := range m[0].Layers {
			img.Size += sizes[l]
		}
		img.ManifestType = "application/vnd.docker.distribution.manifest.v2+json"
	case files["index.json"] != nil:
		var idx struct {
			Manifests []struct {
				Digest      string            `json:"digest"`
				Annotations map[string]string `json:"annotations"`
			} `json:"manifests"`
		}
		if err := json.Unmarshal(files["index.json"], &idx); err != nil || len(idx.Manifests) == 0 {
			return nil, errors.New("index.json: not an OCI index")
		}
		var man struct {
			Config struct{ Digest string } `json:"config"`
			Layers []struct{ Size int64 }  `json:"layers"`
		}
		if err := json.Unmarshal(files[blobPath(idx.Manifests[0].Digest)], &man); err != nil {
			return nil, fmt.Errorf("reading the manifest %s: %w", idx.Manifests[0].Digest, err)
		}
		config = files[blobPath(man.Config.Digest)]
		for _, l := range man.Layers {
			img.Size += l.Size
		}
		if n := idx.Manifests[0].Annotations["org.opencontainers.image.ref.name"]; n != "" {
			img.Names = append(img.Names, normalizeName(n))
		}
		img.ManifestType = "application/vnd.oci.image.manifest.v1+json"
	default:
		return nil, errors.New("loading tar component manifest.json: file does not exist")
	}
	if config == nil {
		return nil, errors.New("the archive's image config is missing")
	}
	var c struct {
		RootFS struct {
			DiffIDs []string `json:"diff_ids"`
		} `json:"rootfs"`
	}
	if err := json.Unmarshal(config, &c); err != nil {
		return nil, fmt.Errorf("the image config: %w", err)
	}
	sum := sha256.Sum256(config)
	img.ID = hex.EncodeToString(sum[:])
	img.Config = config
	img.Layers = c.RootFS.DiffIDs
	// podman records the manifest it writes to its store; a v2s2 manifest of the config and layers stands in
	// for it, so the digest follows from the archive as podman's does.
	man, _ := json.Marshal(map[string]any{"schemaVersion": 2, "mediaType": img.ManifestType,
		"config": map[string]any{"digest": "sha256:" + img.ID, "size": len(config)}, "layers": img.Layers})
	ms := sha256.Sum256(man)
	img.Digest = "sha256:" + hex.EncodeToString(ms[:])
	return img, nil
}

func blobPath(digest string) string {
	return "blobs/" + strings.Replace(digest, ":", "/", 1)
}

// normalizeName is podman's short-name rule for names in an archive: a name without a registry is docker.io's.
func normalizeName(n string) string {
	first, _, hasSlash := strings.Cut(n, "/")
	if hasSlash && (strings.ContainsAny(first, ".:") || first == "localhost") {
		return n
	}
	if !hasSlash {
		n = "library/" + n
	}
	return "docker.io/" + n
}

func saveImage(store string, img *storedImage) error {
	if err := os.MkdirAll(store, 0o755); err != nil {
		return err
	}
	b, err := json.Marshal(img)
	if err != nil {
		return err
	}
	tmp := filepath.Join(store, "."+img.ID+".tmp")
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(store, img.ID+".json"))
}

// findImage resolves a reference as podman does for local images: sha256:ID, an ID or its prefix (3+ hex
// digits), or a name (with or without its "localhost/" or docker.io prefix and ":latest").
func findImage(store, ref string) (*storedImage, error) {
	id := strings.TrimPrefix(ref, "sha256:")
	// NAME@sha256:HEX: the image of that name whose manifest digest is HEX, or (the demo pins its image so,
	// with no registry to give it a manifest digest) whose ID is.
	if name, hexDigest, ok := strings.Cut(ref, "@sha256:"); ok {
		for _, img := range storedImages(store) {
			if img.Digest != "sha256:"+hexDigest && img.ID != hexDigest {
				continue
			}
			for _, n := range img.Names {
				repo := n
				if i := strings.LastIndex(n, ":"); i > strings.LastIndex(n, "/") {
					repo = n[:i]
				}
				if repo == name || repo == normalizeName(name) || repo == "localhost/"+name {
					return img, nil
				}
			}
		}
		return nil, fmt.Errorf("%s: image not known", ref)
	}
	for _, img := range storedImages(store) {
		if len(id) >= 3 && strings.HasPrefix(img.ID, id) {
			return img, nil
		}
		for _, n := range img.Names {
			for _, cand := range []string{ref, ref + ":latest", normalizeName(ref), normalizeName(ref) + ":latest", "localhost/" + ref} {
				if n == cand {
					return img, nil
				}
			}
		}
	}
	return nil, fmt.Errorf("%s: image not known", ref)
}

func storedImages(store string) []*storedImage {
	entries, _ := os.ReadDir(store)
	var out []*storedImage
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".json") || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(store, e.Name()))
		if err != nil {
			continue
		}
		var img storedImage
		if json.Unmarshal(b, &img) == nil {
			out = append(out, &img)
		}
	}
	return out
}

// podmanImages answers "images -q --no-trunc": one "sha256:ID" a line.
func podmanImages(store string, stdout io.Writer) int {
	for _, img := range storedImages(store) {
		fmt.Fprintf(stdout, "sha256:%s\n", img.ID)
	}
	return 0
}

// podmanRmi removes images as podman 4.3 does: "Untagged: NAME" for each
// name, then "Deleted: ID"; with -f an unknown image is no error.
func podmanRmi(store string, args []string, stdout, stderr io.Writer) int {
	force := false
	var refs []string
	for _, a := range args {
		switch a {
		case "-f", "--force":
			force = true
		default:
			if strings.HasPrefix(a, "-") {
				fmt.Fprintf(stderr, "Error: unknown shorthand flag: %q in %s\n", strings.TrimLeft(a, "-")[:1], a)
				return 125
			}
			refs = append(refs, a)
		}
	}
	if len(refs) == 0 {
		fmt.Fprintln(stderr, "Error: image name or ID must be specified")
		return 125
	}
	code := 0
	for _, r := range refs {
		img, err := findImage(store, r)
		if err != nil {
			if !force {
				fmt.Fprintf(stderr, "Error: %s: image not known\n", r)
				code = 1
			}
			continue
		}
		if err := os.Remove(filepath.Join(store, img.ID+".json")); err != nil {
			fmt.Fprintf(stderr, "Error: %v\n", err)
			code = 125
			continue
		}
		for _, n := range img.Names {
			fmt.Fprintf(stdout, "Untagged: %s\n", n)
		}
		fmt.Fprintf(stdout, "Deleted: %s\n", img.ID)
	}
	return code
}

func podmanInspect(store string, refs []string, stdout, stderr io.Writer) int {
	if len(refs) == 0 {
		fmt.Fprintln(stderr, "Error: at least one image name or ID must be specified")
		return 125
	}
	var out []any
	var failed error
	for _, r := range refs {
		img, err := findImage(store, r)
		if err != nil {
			failed = err
			continue
		}
		out = append(out, inspectJSON(store, img))
	}
	if out == nil {
		out = []any{}
	}
	// podman 4.3 indents with five spaces (captured), and prints the array even when a reference failed.
	b, _ := json.MarshalIndent(out, "", "     ")
	fmt.Fprintf(stdout, "%s\n", b)
	if failed != nil {
		fmt.Fprintf(stderr, "Error: inspecting object: %v\n", failed)
		return 125
	}
	return 0
}

type orderedField struct {
	k string
	v any
}

// orderedObject marshals its fields in order, as podman's struct does.
type orderedObject []orderedField

func (o orderedObject) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, f := range o {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(f.k)
		v, err := json.Marshal(f.v)
		if err != nil {
			return nil, err
		}
		b.Write(k)
		b.WriteByte(':')
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

func inspectJSON(store string, img *storedImage) orderedObject {
	var c struct {
		Created      time.Time       `json:"created"`
		Author       string          `json:"author"`
		Architecture string          `json:"architecture"`
		OS           string          `json:"os"`
		Config       json.RawMessage `json:"config"`
		History      json.RawMessage `json:"history"`
	}
	_ = json.Unmarshal(img.Config, &c)
	var cfg struct {
		Labels map[string]string `json:"Labels"`
		User   string            `json:"User"`
	}
	_ = json.Unmarshal(c.Config, &cfg)
	repoDigests := []string{}
	for _, n := range img.Names {
		repo := n
		if i := strings.LastIndex(n, ":"); i > strings.LastIndex(n, "/") {
			repo = n[:i]
		}
		repoDigests = append(repoDigests, repo+"@"+img.Digest)
	}
	names := img.Names
	if names == nil {
		names = []string{}
	}
	top := ""
	if len(img.Layers) > 0 {
		top = strings.TrimPrefix(img.Layers[len(img.Layers)-1], "sha256:")
	}
	config := any(c.Config)
	if len(c.Config) == 0 {
		config = map[string]any{}
	}
	history := any(c.History)
	if len(c.History) == 0 {
		history = []any{}
	}
	layers := img.Layers
	if layers == nil {
		layers = []string{}
	}
	labels := any(nil)
	if cfg.Labels != nil {
		labels = cfg.Labels
	}
	sort.Strings(repoDigests)
	return orderedObject{
		{"Id", img.ID}, {"Digest", img.Digest}, {"RepoTags", names}, {"RepoDigests", repoDigests},
		{"Parent", ""}, {"Comment", ""}, {"Created", c.Created}, {"Config", config}, {"Version", ""},
		{"Author", c.Author}, {"Architecture", c.Architecture}, {"Os", c.OS}, {"Size", img.Size},
		{"VirtualSize", img.Size},
		{"GraphDriver", orderedObject{{"Name", "overlay"}, {"Data", orderedObject{
			{"UpperDir", filepath.Join(store, "overlay", top, "diff")}, {"WorkDir", filepath.Join(store, "overlay", top, "work")}}}}},
		{"RootFS", orderedObject{{"Type", "layers"}, {"Layers", layers}}},
		{"Labels", labels}, {"Annotations", map[string]string{}}, {"ManifestType", img.ManifestType},
		{"User", cfg.User}, {"History", history}, {"NamesHistory", names},
	}
}

// podmanRun runs the command "in" the image: on the node itself, with the node's PATH only when GPUs were
// passed in (the container's nvidia-smi comes with the devices), else with the image's own PATH.
func podmanRun(store string, args []string, env []string, stdout, stderr io.Writer) int {
	withValue := map[string]bool{"--device": true, "--gpus": true, "--name": true, "-e": true, "--env": true,
		"--network": true, "-v": true, "--volume": true, "-u": true, "--user": true, "-w": true, "--workdir": true,
		"--security-opt": true, "--ipc": true, "--shm-size": true, "--ulimit": true, "--entrypoint": true}
	flags := map[string]bool{"--rm": true, "-i": true, "-t": true, "-it": true, "--init": true, "--privileged": true}
	gpus := false
	i := 0
	for ; i < len(args) && strings.HasPrefix(args[i], "-"); i++ {
		a, v, hasV := strings.Cut(args[i], "=")
		switch {
		case flags[a] && !hasV:
		case withValue[a]:
			if !hasV {
				if i+1 >= len(args) {
					fmt.Fprintf(stderr, "Error: flag needs an argument: %s\nSee 'podman run --help'\n", a)
					return 125
				}
				i++
				v = args[i]
			}
			if (a == "--device" && strings.HasPrefix(v, "nvidia.com/gpu=")) || a == "--gpus" {
				gpus = true
			}
		default:
			fmt.Fprintf(stderr, "Error: unknown flag: %s\nSee 'podman run --help'\n", a)
			return 125
		}
	}
	if i >= len(args) {
		fmt.Fprintln(stderr, "Error: requires at least 1 arg(s), only received 0")
		return 125
	}
	img, err := findImage(store, args[i])
	if err != nil {
		fmt.Fprintf(stderr, "Error: %v\n", err)
		return 125
	}
	command := args[i+1:]
	if len(command) == 0 {
		var c struct {
			Config struct{ Cmd []string } `json:"config"`
		}
		_ = json.Unmarshal(img.Config, &c)
		command = c.Config.Cmd
	}
	if len(command) == 0 {
		fmt.Fprintln(stderr, "Error: no command or entrypoint provided, and no CMD or ENTRYPOINT from image")
		return 125
	}
	path := ""
	if gpus {
		path = lookupEnv(env, "PATH")
	}
	exe, err := lookPath(command[0], path)
	if err != nil {
		fmt.Fprintf(stderr, "Error: crun: executable file `%s` not found in $PATH: No such file or directory: OCI runtime attempted to invoke a command that was not found\n", command[0])
		return 127
	}
	cmd := exec.Command(exe, command[1:]...)
	cmd.Env, cmd.Stdout, cmd.Stderr = env, stdout, stderr
	if err := cmd.Run(); err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode()
		}
		fmt.Fprintf(stderr, "Error: %v\n", err)
		return 126
	}
	return 0
}

func lookPath(name, path string) (string, error) {
	if strings.Contains(name, "/") {
		return "", errors.New("not in the simulated image")
	}
	for _, d := range filepath.SplitList(path) {
		p := filepath.Join(d, name)
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", errors.New("not found")
}

// DemoImageRef is the tag of the demo's image archive.
const DemoImageRef = "localhost/gpuaccept-demo:1"

// WriteDemoImage writes the demo's image as a docker-archive at path (one small layer) and returns its image
// ID, the sha256 of its config: the digest the demo's inventory pins. The bytes are the same on every call.
func WriteDemoImage(path string) (string, error) {
	var layer bytes.Buffer
	lw := tar.NewWriter(&layer)
	body := []byte("gpuaccept demo image: SIMULATED, no real container runs in the demo\n")
	epoch := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, h := range []*tar.Header{
		{Name: "etc/", Typeflag: tar.TypeDir, Mode: 0o755, ModTime: epoch},
		{Name: "etc/gpuaccept-demo", Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(body)), ModTime: epoch},
	} {
		if err := lw.WriteHeader(h); err != nil {
			return "", err
		}
		if h.Typeflag == tar.TypeReg {
			lw.Write(body)
		}
	}
	if err := lw.Close(); err != nil {
		return "", err
	}
	ls := sha256.Sum256(layer.Bytes())
	layerHex := hex.EncodeToString(ls[:])
	config, err := json.Marshal(map[string]any{
		"architecture": "amd64", "os": "linux", "created": epoch,
		"config":  map[string]any{"Env": []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}, "Cmd": []string{"/bin/sh"}},
		"rootfs":  map[string]any{"type": "layers", "diff_ids": []string{"sha256:" + layerHex}},
		"history": []map[string]any{{"created": epoch, "created_by": "gpuaccept demo", "comment": "SIMULATED"}},
	})
	if err != nil {
		return "", err
	}
	cs := sha256.Sum256(config)
	id := hex.EncodeToString(cs[:])
	manifest, _ := json.Marshal([]map[string]any{{"Config": id + ".json", "RepoTags": []string{DemoImageRef}, "Layers": []string{layerHex + "/layer.tar"}}})
	f, err := os.Create(path)
	if err != nil {
		return "", err
	}
	tw := tar.NewWriter(f)
	for _, e := range []struct {
		name string
		b    []byte
	}{{layerHex + "/layer.tar", layer.Bytes()}, {id + ".json", config}, {"manifest.json", manifest}} {
		if err := tw.WriteHeader(&tar.Header{Name: e.name, Mode: 0o644, Size: int64(len(e.b)), ModTime: epoch}); err != nil {
			f.Close()
			return "", err
		}
		if _, err := tw.Write(e.b); err != nil {
			f.Close()
			return "", err
		}
	}
	if err := tw.Close(); err != nil {
		f.Close()
		return "", err
	}
	return id, f.Close()
}
