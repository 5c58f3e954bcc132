package inventory

import (
	"errors"
	"fmt"
	"math"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"gpuaccept/orchestrator/record"
)

// Defaults filled in when the inventory leaves a key out. A key written
// with a value is never defaulted: port: 0 is an error, not port 22.
const (
	DefaultTolerance   = 0.9
	DefaultDiagLevel   = 1
	DefaultConcurrency = 32
	DefaultPort        = 22
	DefaultKnownHosts  = "~/.ssh/known_hosts"
)

// validator checks a decoded inventory and fills its defaults. Problems
// go to the collector, which places them in the file.
type validator struct {
	inv *Inventory
	c   *collector
	// dir is the inventory's directory: relative paths in it are relative
	// to the file, not to wherever gpuaccept was started.
	dir string
}

func validate(inv *Inventory, c *collector, dir string) {
	v := &validator{inv: inv, c: c, dir: dir}
	v.top()
	v.ssh()
	v.nodes()
	v.image()
	v.quote()
	v.acceptance()
	v.slurm()
	v.phases()
	v.cost()
}

// given reports whether the file or the environment sets key.
func (v *validator) given(key string) bool {
	_, fromEnv := v.c.env[key]
	return fromEnv || v.c.idx.given(key)
}

// problem records a problem with key unless key already has one (a type
// error, say): one mistake, one message.
func (v *validator) problem(key, format string, args ...any) {
	if !v.c.blocked(key) {
		v.c.addf(key, format, args...)
	}
}

func (v *validator) top() {
	if strings.TrimSpace(v.inv.Provider) == "" {
		v.problem("provider", "required: who rents out the nodes, e.g. %q", "vendor-a")
	}
}

func (v *validator) ssh() {
	s := &v.inv.SSH
	if !v.given("ssh.concurrency") {
		s.Concurrency = DefaultConcurrency
	} else if s.Concurrency < 0 {
		v.problem("ssh.concurrency", "must be 0 (no limit) or more, got %d", s.Concurrency)
	}
	v.nonNegativeDuration("ssh.connect_timeout", s.ConnectTimeout)
	v.nonNegativeDuration("ssh.handshake_timeout", s.HandshakeTimeout)
	v.nonNegativeDuration("ssh.session_timeout", s.SessionTimeout)
	v.nonNegativeDuration("ssh.keepalive_interval", s.KeepaliveInterval)
	v.nonNegativeInt("ssh.keepalive_misses", s.KeepaliveMisses)
	for i := range s.IdentityFiles {
		s.IdentityFiles[i] = v.path(fmt.Sprintf("ssh.identity_files[%d]", i), s.IdentityFiles[i])
	}
	if len(s.KnownHosts) == 0 {
		s.KnownHosts = []string{v.path("ssh.known_hosts", DefaultKnownHosts)}
	} else {
		for i := range s.KnownHosts {
			s.KnownHosts[i] = v.path(fmt.Sprintf("ssh.known_hosts[%d]", i), s.KnownHosts[i])
		}
	}
	if s.Config != "" && !strings.EqualFold(s.Config, "none") {
		s.Config = v.path("ssh.config", s.Config)
	}
	for i, hop := range s.Jump {
		if msg := checkHop(hop); msg != "" {
			v.problem(fmt.Sprintf("ssh.jump[%d]", i), "%s", msg)
		}
	}
}

// path expands ~ and resolves a relative path against the inventory's
// directory. The file need not exist yet: the dial step says so, per node.
func (v *validator) path(key, p string) string {
	if strings.TrimSpace(p) == "" {
		v.problem(key, "empty path")
		return p
	}
	expanded, err := expandHome(p)
	if err != nil {
		v.problem(key, "%v", err)
		return p
	}
	if !filepath.IsAbs(expanded) {
		expanded = filepath.Join(v.dir, expanded)
	}
	return expanded
}

func expandHome(p string) (string, error) {
	if p != "~" && !strings.HasPrefix(p, "~/") {
		if strings.HasPrefix(p, "~") {
			return "", fmt.Errorf("%q: ~user is not supported; write the full path", short(p))
		}
		return p, nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("cannot expand ~ in %q: %v", short(p), err)
	}
	return filepath.Join(home, p[1:]), nil
}

// checkHop reads a ProxyJump hop as the remote package will:
// [user@]host[:port], one hop per list entry.
func checkHop(hop string) string {
	bad := func(why string) string {
		return fmt.Sprintf("expected [user@]host[:port], got %q: %s", short(hop), why)
	}
	h := strings.TrimPrefix(hop, "ssh://")
	switch {
	case strings.TrimSpace(h) == "":
		return bad("empty")
	case strings.Contains(h, ","):
		return bad("one hop per list entry, in order")
	case strings.ContainsAny(h, " \t"):
		return bad("contains whitespace")
	}
	if i := strings.LastIndex(h, "@"); i >= 0 {
		if i == 0 {
			return bad("no user before @")
		}
		h = h[i+1:]
	}
	host := h
	if hh, p, err := net.SplitHostPort(h); err == nil {
		host = hh
		if port, err := strconv.Atoi(p); err != nil || port < 1 || port > 65535 {
			return bad("port must be 1..65535")
		}
	}
	if host == "" {
		return bad("no host")
	}
	return ""
}

var dnsLabel = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

func (v *validator) nodes() {
	if len(v.inv.Nodes) == 0 {
		v.problem("nodes", "at least one node is required")
		return
	}
	names := map[string]int{}
	for i := range v.inv.Nodes {
		v.node(i, names)
	}
	v.users()
	v.duplicateEndpoints()
}

func (v *validator) node(i int, names map[string]int) {
	n := &v.inv.Nodes[i]
	key := fmt.Sprintf("nodes[%d]", i)
	switch {
	case n.Name == "":
		v.problem(key+".name", "required: a short unique name such as gpu-01, used in reports and file names")
	case !dnsLabel.MatchString(n.Name):
		v.problem(key+".name", "%q is not a DNS label: use lowercase letters, digits and '-', at most 63, starting and ending with a letter or digit", short(n.Name))
	default:
		if j, dup := names[n.Name]; dup {
			v.problem(key+".name", "duplicate name: nodes[%d] is also called %q", j, n.Name)
		} else {
			names[n.Name] = i
		}
	}
	if msg := checkAddress(n.Address); msg != "" {
		v.problem(key+".address", "%s", msg)
	}
	// An absent port stays 0: the dial then takes ssh_config's Port for
	// the address, else 22, as ssh does.
	if v.given(key+".port") && (n.Port < 1 || n.Port > 65535) {
		v.problem(key+".port", "must be 1..65535, got %d", n.Port)
	}
	if v.given(key + ".fabric_address") {
		if _, _, err := net.SplitHostPort(n.FabricAddress); err == nil {
			v.problem(key+".fabric_address", "%q: an address without a port (the nodes reach each other on their SSH port)", short(n.FabricAddress))
		} else if msg := checkAddress(n.FabricAddress); msg != "" {
			v.problem(key+".fabric_address", "%s", msg)
		}
	}
}

// checkAddress accepts what ssh would: an IP address, a host name or an
// ssh_config alias; the usual slips (a port or a user in it) are named.
func checkAddress(a string) string {
	switch {
	case a == "":
		return "required: the node's IP address or host name"
	case strings.ContainsAny(a, " \t\r\n"):
		return fmt.Sprintf("%q contains whitespace", short(a))
	case strings.Contains(a, "@"):
		return fmt.Sprintf("%q: give the user in user, not in the address", short(a))
	case strings.HasPrefix(a, "["):
		return fmt.Sprintf("%q: write an IPv6 address without brackets", short(a))
	case strings.Contains(a, "/"):
		return fmt.Sprintf("%q is not an IP address or host name", short(a))
	}
	if host, port, err := net.SplitHostPort(a); err == nil {
		return fmt.Sprintf("%q: give the port in port (address: %s, port: %s)", short(a), host, port)
	}
	return ""
}

// users fills each node's user from ssh.user, or says who has none.
func (v *validator) users() {
	nodes := v.inv.Nodes
	var missing []int
	for i := range nodes {
		if nodes[i].User == "" {
			if v.inv.SSH.User != "" {
				nodes[i].User = v.inv.SSH.User
				continue
			}
			missing = append(missing, i)
		}
	}
	if len(missing) == 0 {
		return
	}
	if len(missing) == len(nodes) {
		v.problem("ssh.user", "required: set ssh.user, or user on every node")
		return
	}
	for _, i := range missing {
		v.problem(fmt.Sprintf("nodes[%d].user", i), "required: ssh.user is not set, so every node needs a user")
	}
}

// duplicateEndpoints flags two nodes that are one machine: the window
// would count its GPUs twice.
func (v *validator) duplicateEndpoints() {
	seen := map[string]int{}
	for i, n := range v.inv.Nodes {
		key := fmt.Sprintf("nodes[%d]", i)
		if checkAddress(n.Address) != "" || v.c.blocked(key+".address") || v.c.blocked(key+".port") {
			continue
		}
		port := n.Port
		if port == 0 {
			port = DefaultPort
		}
		ep := net.JoinHostPort(strings.ToLower(n.Address), strconv.Itoa(port))
		if j, dup := seen[ep]; dup {
			v.problem(key+".address", "%s is also nodes[%d] (%q): each node needs its own address and port", ep, j, v.inv.Nodes[j].Name)
			continue
		}
		seen[ep] = i
	}
}

var pinnedImage = regexp.MustCompile(`^[^\s@]+@sha256:[0-9a-f]{64}$`)

func (v *validator) image() {
	im := &v.inv.Image
	if im.Reference != "" && !pinnedImage.MatchString(im.Reference) {
		v.problem("image.reference", "%s", imageMessage(im.Reference))
	}
	if im.Runtime != "" {
		switch rt := strings.ToLower(im.Runtime); rt {
		case "docker", "podman", "enroot":
			im.Runtime = rt
		default:
			v.problem("image.runtime", "must be docker, podman or enroot, got %q", short(im.Runtime))
		}
	} else {
		im.Runtime = "docker"
	}
	if v.given("image.archive") {
		im.Archive = v.path("image.archive", im.Archive)
		if fi, err := os.Stat(im.Archive); err != nil {
			v.problem("image.archive", "cannot read %s: %v", im.Archive, errors.Unwrap(err))
		} else if fi.IsDir() {
			v.problem("image.archive", "%s is a directory: give the docker-archive or oci-archive tarball (docker save / podman save -o)", im.Archive)
		}
	}
	switch im.Mode {
	case "":
		im.Mode = "pull"
		if im.Archive != "" {
			im.Mode = "push"
		}
	case "pull":
	case "push":
		if im.Archive == "" {
			v.problem("image.mode", "push needs image.archive: the tarball the coordinator distributes")
		}
	default:
		v.problem("image.mode", "must be pull or push, got %q", short(im.Mode))
	}
	if im.Reference == "" && (im.Archive != "" || v.given("image.mode")) {
		v.problem("image.reference", "required with an image: NAME[:TAG]@sha256:<64 hex digits>, the pin every node's image must match")
	}
	switch im.Relay {
	case "":
		im.Relay = "chain"
	case "chain", "direct":
	default:
		v.problem("image.relay", "must be chain or direct, got %q", short(im.Relay))
	}
	switch im.GPUs {
	case "":
		im.GPUs = "all"
	case "all", "none":
	default:
		v.problem("image.gpus", "must be all or none, got %q", short(im.GPUs))
	}
	if len(im.Smoke) == 0 {
		im.Smoke = []string{"nvidia-smi", "-L"}
	}
	if im.Dir == "" {
		im.Dir = "/var/tmp"
	} else if strings.ContainsAny(im.Dir, "'\"\n$`") {
		v.problem("image.dir", "%q: no quotes, $ or backquotes in a path", short(im.Dir))
	}
}

// imageMessage explains why a reference is not pinned. A tag can be moved
// to another image between two runs; only a digest names one image.
func imageMessage(ref string) string {
	name, digest, pinned := strings.Cut(ref, "@")
	switch {
	case !pinned:
		return fmt.Sprintf("%q is not pinned: a tag can be moved to another image; pin it by digest as NAME@sha256:<64 hex digits> (docker buildx imagetools inspect %s prints it)",
			short(ref), short(ref))
	case strings.TrimSpace(name) == "" || strings.ContainsAny(name, " \t"):
		return fmt.Sprintf("%q: expected NAME[:TAG]@sha256:<64 hex digits>", short(ref))
	}
	if hex, ok := strings.CutPrefix(digest, "sha256:"); ok {
		return fmt.Sprintf("bad digest: expected sha256: and 64 lowercase hex digits, got %d characters %q", len(hex), short(hex))
	}
	return fmt.Sprintf("bad digest %q: expected sha256: and 64 lowercase hex digits", short(digest))
}

var currencyCode = regexp.MustCompile(`^[A-Za-z]{3}$`)

func (v *validator) quote() {
	q := &v.inv.Quote
	v.nonNegativeInt("quote.gpus_per_node", q.GPUsPerNode)
	v.nonNegativeInt("quote.nics_per_node", q.NICsPerNode)
	v.nonNegativeNumber("quote.gpu_memory_gib", q.GPUMemoryGiB)
	v.nonNegativeNumber("quote.nic_gbps", q.NICGbps)
	v.nonNegativeNumber("quote.intra_busbw_gbs", q.IntraBusBWGBs)
	v.nonNegativeNumber("quote.inter_busbw_gbs", q.InterBusBWGBs)
	v.nonNegativeNumber("quote.staging_gbs", q.StagingGBs)
	v.nonNegativeNumber("quote.checkpoint_gbs", q.CheckpointGBs)
	v.nonNegativeNumber("quote.price_per_gpu_hour", q.PricePerGPUHr)
	v.nonNegativeInt("quote.cpus_per_node", q.CPUsPerNode)
	v.nonNegativeNumber("quote.host_memory_gib", q.HostMemoryGiB)
	if q.PriceStoragePerTiBMonth != nil {
		v.nonNegativeNumber("quote.price_storage_per_tib_month", *q.PriceStoragePerTiBMonth)
	}
	if q.PriceEgressPerGiB != nil {
		v.nonNegativeNumber("quote.price_egress_per_gib", *q.PriceEgressPerGiB)
	}
	if q.PriceHostPerNodeHour != nil {
		v.nonNegativeNumber("quote.price_host_per_node_hour", *q.PriceHostPerNodeHour)
	}
	if q.BusBWSize < 0 {
		v.problem("quote.busbw_size", "must not be negative, got %d", q.BusBWSize)
	}
	switch {
	case q.FormFactor == "":
	case strings.EqualFold(q.FormFactor, "SXM"):
		q.FormFactor = "SXM"
	case strings.EqualFold(q.FormFactor, "PCIe"):
		q.FormFactor = "PCIe"
	default:
		v.problem("quote.form_factor", "must be SXM or PCIe, got %q", short(q.FormFactor))
	}
	if q.Currency != "" {
		if currencyCode.MatchString(q.Currency) {
			q.Currency = strings.ToUpper(q.Currency)
		} else {
			v.problem("quote.currency", "expected an ISO 4217 code such as USD or EUR, got %q", short(q.Currency))
		}
	}
	if q.Billing != "" {
		if d, err := time.ParseDuration(q.Billing); err != nil || d <= 0 {
			v.problem("quote.billing_granularity", "expected the billing step as a duration such as \"1s\", \"1m\" or \"1h\", got %q", short(q.Billing))
		}
	}
	v.terms(&q.Terms)
}

// terms checks what can be checked of the contract's terms: the durations
// and the list of compliance claims. The free text is the provider's.
func (v *validator) terms(t *Terms) {
	const k = "quote.terms."
	if v.given(k+"support_response") && t.SupportResponse <= 0 {
		v.problem(k+"support_response", "must be more than 0 (the promised time to a first response, e.g. 1h), got %v", t.SupportResponse)
	}
	v.nonNegativeDuration(k+"benchmark_window", t.BenchmarkWindow)
	seen := map[string]int{}
	for i, c := range t.Compliance {
		key := fmt.Sprintf("%scompliance[%d]", k, i)
		name := strings.TrimSpace(c)
		if name == "" {
			v.problem(key, "empty: name the certification or standard claimed, e.g. %q", "SOC2")
			continue
		}
		if j, dup := seen[strings.ToLower(name)]; dup {
			v.problem(key, "%q is listed twice (also compliance[%d])", short(name), j)
			continue
		}
		seen[strings.ToLower(name)] = i
	}
}

// DefaultCostUnit is the cost ledger's unit of accepted work when
// cost.unit is not given.
const DefaultCostUnit = "accepted node"

// cost checks the cost ledger's inputs: amounts are not negative, a usage
// has the price that makes it a cost, a unit of its own comes with its
// count. Unknown monthly components are unknown keys already.
func (v *validator) cost() {
	c := &v.inv.Cost
	q := &v.inv.Quote
	const k = "cost."
	for _, a := range []struct {
		key string
		val *float64
	}{{"storage_tib", c.StorageTiB}, {"egress_gib", c.EgressGiB}, {"support", c.Support},
		{"licences", c.Licences}, {"accepted_units", c.AcceptedUnits}} {
		if a.val != nil {
			v.nonNegativeNumber(k+a.key, *a.val)
		}
	}
	if c.StorageTiB != nil && q.PriceStoragePerTiBMonth == nil {
		v.problem(k+"storage_tib", "needs quote.price_storage_per_tib_month to be priced")
	}
	if c.EgressGiB != nil && q.PriceEgressPerGiB == nil {
		v.problem(k+"egress_gib", "needs quote.price_egress_per_gib to be priced")
	}
	if v.given(k + "unit") {
		c.Unit = strings.TrimSpace(c.Unit)
		switch {
		case c.Unit == "":
			v.problem(k+"unit", "empty: name one unit of accepted work, e.g. %q, or leave the key out (%q)", "training step", DefaultCostUnit)
		case c.Unit != DefaultCostUnit && c.AcceptedUnits == nil:
			v.problem(k+"unit", "%q needs cost.accepted_units: how many the window produced (only accepted nodes are counted by gpuaccept)", short(c.Unit))
		}
	}
	for _, m := range c.Monthly.Components() {
		v.nonNegativeNumber(k+"monthly."+m.Name, *m.Value)
	}
}

func (v *validator) acceptance() {
	a := &v.inv.Acceptance
	if !v.given("acceptance.tolerance") {
		a.Tolerance = DefaultTolerance
	} else {
		v.fraction("acceptance.tolerance", a.Tolerance)
	}
	for id, f := range a.Thresholds {
		key := "acceptance.thresholds." + id
		if v.requirement(key, id, func(r record.Requirement) bool { return r.Tolerance },
			"is not judged against a quoted figure, so a threshold would never be used") {
			v.fraction(key, f)
		}
	}
	if !v.given("acceptance.regression") {
		a.Regression = record.DefaultRegression
	} else {
		v.regressionFraction("acceptance.regression", a.Regression)
	}
	for id, f := range a.RegressionByID {
		key := "acceptance.regression_by_id." + id
		if v.requirement(key, id, func(r record.Requirement) bool { return r.Figure },
			"measures no figure, so gpuaccept diff has nothing to hold to a threshold") {
			v.regressionFraction(key, f)
		}
	}
}

// requirement checks that id, a key under key's map, is a requirement of
// the catalog that fits (uses says why one that does not fit is refused),
// with the nearest fitting ID as a did-you-mean: a mistyped ID would
// otherwise be accepted and silently never used.
func (v *validator) requirement(key, id string, fits func(record.Requirement) bool, why string) bool {
	r, known := record.Lookup(id)
	switch {
	case known && fits(r):
		return true
	case known:
		v.problem(key, "%s (%q) %s; it applies to %s", id, r.Title, why, fittingIDs(fits))
	default:
		msg := fmt.Sprintf("%q is not a requirement ID gpuaccept judges", short(id))
		if s := record.Suggest(id, fits); s != "" {
			msg += fmt.Sprintf("; did you mean %s?", s)
		} else {
			msg += "; it applies to " + fittingIDs(fits)
		}
		v.problem(key, "%s", msg)
	}
	return false
}

func fittingIDs(fits func(record.Requirement) bool) string {
	var ids []string
	for _, r := range record.Catalog() {
		if fits(r) {
			ids = append(ids, r.ID)
		}
	}
	return strings.Join(ids, ", ")
}

// regressionFraction checks how much worse than the baseline a figure may
// be, as a fraction of it: 0 makes any worsening a regression; 1 lets a
// throughput fall to nothing or a time double.
func (v *validator) regressionFraction(key string, f float64) {
	if !(f >= 0 && f <= 1) {
		v.problem(key, "must be at least 0 and at most 1 (how much worse than the baseline a figure may be: 0.05 allows 5%%), got %v", f)
	}
}

// fraction checks a share of a quoted figure: 0.9 passes at 90%.
func (v *validator) fraction(key string, f float64) {
	if !(f > 0 && f <= 1) {
		v.problem(key, "must be more than 0 and at most 1 (a fraction of the quoted figure: 0.9 passes at 90%%), got %v", f)
	}
}

func (v *validator) phases() {
	p := &v.inv.Phases
	v.nonNegativeDuration("phases.deadline", p.Deadline)
	v.nonNegativeDuration("phases.preflight.timeout", p.Preflight.Timeout)
	v.nonNegativeDuration("phases.diag.timeout", p.Diag.Timeout)
	if !v.given("phases.diag.level") {
		p.Diag.Level = DefaultDiagLevel
	} else if p.Diag.Level < 1 || p.Diag.Level > 4 {
		v.problem("phases.diag.level", "must be 1..4 (dcgmi diag -r: 1 quick, 2 medium, 3 long, 4 extended), got %d", p.Diag.Level)
	}
	v.allReduce(&p.AllReduce)
	v.nonNegativeDuration("phases.image.timeout", p.ImagePh.Timeout)
	v.staging(&p.Staging)
	v.checkpoint(&p.Checkpoint)
	v.failure(&p.Failure, &p.Checkpoint)
}

var (
	sourceName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$`)
	sha256Hex  = regexp.MustCompile(`^[0-9a-f]{64}$`)
)

// staging checks the sources: each has a file-safe name and exactly one
// origin.
func (v *validator) staging(st *Staging) {
	const k = "phases.staging."
	v.nonNegativeDuration(k+"timeout", st.Timeout)
	v.nonNegativeDuration(k+"window", st.Window)
	if !st.Enabled {
		return
	}
	if strings.TrimSpace(st.Dir) == "" {
		v.problem(k+"dir", "required: the node-local directory to stage into, e.g. /scratch/gpuaccept")
	} else if strings.ContainsAny(st.Dir, "'\"\n$`") {
		v.problem(k+"dir", "%q: no quotes, $ or backquotes in a path", short(st.Dir))
	}
	if len(st.Sources) == 0 {
		v.problem(k+"sources", "at least one source is required: {name, path | url | size}")
	}
	names := map[string]int{}
	for i := range st.Sources {
		src := &st.Sources[i]
		key := fmt.Sprintf("%ssources[%d]", k, i)
		switch {
		case !sourceName.MatchString(src.Name):
			v.problem(key+".name", "%q: a file-safe name is required (letters, digits, '.', '_', '-')", short(src.Name))
		default:
			if j, dup := names[src.Name]; dup {
				v.problem(key+".name", "duplicate name: sources[%d] is also called %q", j, src.Name)
			}
			names[src.Name] = i
		}
		n := 0
		for _, set := range []bool{src.Path != "", src.URL != "", v.given(key + ".size")} {
			if set {
				n++
			}
		}
		if n != 1 {
			v.problem(key, "give exactly one of path (shared storage), url (http, https, s3, gs, az) or size (synthetic data), got %d", n)
			continue
		}
		switch {
		case src.URL != "":
			scheme, _, ok := strings.Cut(src.URL, "://")
			if !ok || !slices.Contains([]string{"http", "https", "s3", "gs", "az"}, scheme) {
				v.problem(key+".url", "%q: expected http://, https://, s3://, gs:// or az://", short(src.URL))
			}
		case src.Path != "":
			if !strings.HasPrefix(src.Path, "/") {
				v.problem(key+".path", "%q: an absolute path on the nodes' shared storage", short(src.Path))
			}
		default:
			if src.Size <= 0 {
				v.problem(key+".size", "must be more than 0 bytes, got %s", src.Size)
			}
		}
		if src.Endpoint != "" {
			switch u, err := url.Parse(src.Endpoint); {
			case !strings.HasPrefix(src.URL, "s3://"):
				v.problem(key+".endpoint", "only for an s3:// url (an S3-compatible store's address); this source is not one")
			case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil:
				v.problem(key+".endpoint", "%q: expected the store's http:// or https:// address, e.g. https://object.example.com", short(src.Endpoint))
			case strings.ContainsAny(src.Endpoint, "'\"\n$`\\ "):
				v.problem(key+".endpoint", "%q: no quotes, spaces, $ or backquotes in an address", short(src.Endpoint))
			}
		}
		if src.SHA256 != "" && !sha256Hex.MatchString(src.SHA256) {
			v.problem(key+".sha256", "expected 64 lowercase hex digits, got %q", short(src.SHA256))
		}
	}
	if st.Window <= 0 && v.given(k+"window") {
		v.problem(k+"window", "must be more than 0")
	}
}

// checkpoint fills the defaults: 1 GiB per node, one shard per GPU, a
// shared directory.
func (v *validator) checkpoint(c *Checkpoint) {
	const k = "phases.checkpoint."
	v.nonNegativeDuration(k+"timeout", c.Timeout)
	if !v.given(k + "size") {
		c.Size = 1 << 30
	} else if c.Size <= 0 {
		v.problem(k+"size", "must be more than 0 bytes, got %s", c.Size)
	}
	if !v.given(k + "shards") {
		c.Shards = max(v.inv.Quote.GPUsPerNode, 1)
	} else if c.Shards < 1 {
		v.problem(k+"shards", "must be at least 1, got %d", c.Shards)
	}
	if !c.Enabled {
		return
	}
	if strings.TrimSpace(c.Dir) == "" {
		v.problem(k+"dir", "required: where the checkpoint is written (a shared filesystem, or a local disk with shared: false)")
	} else if strings.ContainsAny(c.Dir, "'\"\n$`") {
		v.problem(k+"dir", "%q: no quotes, $ or backquotes in a path", short(c.Dir))
	}
}

// failure fills the failure test's defaults and checks its choices.
func (v *validator) failure(f *Failure, c *Checkpoint) {
	const k = "phases.failure."
	for _, d := range []struct {
		key string
		d   time.Duration
	}{{"timeout", f.Timeout}, {"cut_for", f.CutFor}, {"collective_timeout", f.CollectiveTimeout}, {"resume_within", f.ResumeWithin}, {"step_time", f.StepTime}} {
		v.nonNegativeDuration(k+d.key, d.d)
	}
	if f.Inject == "" {
		f.Inject = "kill-node"
	}
	switch f.Inject {
	case "kill-worker", "kill-node", "cut":
	case "reboot":
		if !f.AllowReboot {
			v.problem(k+"inject", "reboot restarts a rented machine: set phases.failure.allow_reboot: true to mean it")
		}
	default:
		v.problem(k+"inject", "must be kill-worker, kill-node, cut or reboot, got %q", short(f.Inject))
	}
	if f.Recovery == "" {
		f.Recovery = "elastic"
	} else if f.Recovery != "elastic" && f.Recovery != "relaunch" {
		v.problem(k+"recovery", "must be elastic or relaunch, got %q", short(f.Recovery))
	}
	if f.CutFor == 0 {
		f.CutFor = 30 * time.Second
	}
	if !v.given(k + "step_time") {
		f.StepTime = 500 * time.Millisecond
	}
	if f.CollectiveTimeout == 0 {
		f.CollectiveTimeout = 30 * time.Second
	}
	if f.ResumeWithin == 0 {
		f.ResumeWithin = 5 * time.Minute
	}
	if f.Python == "" {
		f.Python = "python3"
	}
	for _, d := range []struct {
		key      string
		n        *int
		def, min int
	}{{"checkpoint_every", &f.CheckpointEvery, 5, 1}, {"hidden", &f.Hidden, 1024, 1}, {"steady_steps", &f.SteadySteps, 5, 1},
		{"resume_steps", &f.ResumeSteps, 3, 1}, {"procs_per_node", &f.ProcsPerNode, max(v.inv.Quote.GPUsPerNode, 1), 1}} {
		if !v.given(k + d.key) {
			*d.n = d.def
		} else if *d.n < d.min {
			v.problem(k+d.key, "must be at least %d, got %d", d.min, *d.n)
		}
	}
	if f.InImage == nil {
		on := v.inv.Image.Reference != ""
		f.InImage = &on
	} else if *f.InImage && v.inv.Image.Reference == "" {
		v.problem(k+"in_image", "there is no image to run in: set image.reference (and image.mode)")
	}
	if *f.InImage && v.inv.Image.Runtime == "enroot" {
		v.problem(k+"in_image", "the job runs in the image with docker or podman, not enroot")
	}
	if f.MaxStepsLost == nil {
		n := f.CheckpointEvery
		f.MaxStepsLost = &n
	} else if *f.MaxStepsLost < 0 {
		v.problem(k+"max_steps_lost", "must not be negative, got %d", *f.MaxStepsLost)
	}
	if v.given(k+"port") && (f.Port < 1024 || f.Port > 65535) {
		v.problem(k+"port", "must be between 1024 and 65535, got %d", f.Port)
	}
	if !f.Enabled {
		return
	}
	if f.Dir == "" {
		f.Dir = c.Dir
	}
	if strings.TrimSpace(f.Dir) == "" {
		v.problem(k+"dir", "required: a directory every node sees, for the job's checkpoints (or set phases.checkpoint.dir)")
	} else if strings.ContainsAny(f.Dir, "'\"\n$`") {
		v.problem(k+"dir", "%q: no quotes, $ or backquotes in a path", short(f.Dir))
	}
	if len(v.inv.Nodes) < 2 {
		v.problem(k+"enabled", "the failure test needs at least 2 nodes (one to fail, one to go on), got %d", len(v.inv.Nodes))
	}
	if f.Victim != "" {
		found := false
		for i, n := range v.inv.Nodes {
			if n.Name == f.Victim {
				found = true
				if i == 0 {
					v.problem(k+"victim", "%s is the first node, which holds the job's rendezvous: failing it ends the job for good; choose another", f.Victim)
				}
			}
		}
		if !found {
			v.problem(k+"victim", "no node named %q in nodes", short(f.Victim))
		}
	}
}

// allReduce fills the sweep's defaults (those of a typical acceptance run:
// 1 MiB to 8 GiB, doubling) and checks that the sweep makes sense.
func (v *validator) allReduce(a *AllReduce) {
	const k = "phases.allreduce."
	v.nonNegativeDuration(k+"timeout", a.Timeout)
	if a.Binary == "" {
		a.Binary = "all_reduce_perf"
	}
	defaults := []struct {
		key string
		n   *int
		def int
		min int
	}{{"step_factor", &a.Factor, 2, 2}, {"iters", &a.Iters, 20, 1}, {"warmup", &a.Warmup, 5, 0}, {"repeats", &a.Repeats, 3, 1}}
	for _, d := range defaults {
		if !v.given(k + d.key) {
			*d.n = d.def
		} else if *d.n < d.min {
			v.problem(k+d.key, "must be at least %d, got %d", d.min, *d.n)
		}
	}
	if !v.given(k + "ranks_per_node") {
		a.RanksPerNode = max(v.inv.Quote.GPUsPerNode, 1)
	} else if a.RanksPerNode < 1 {
		v.problem(k+"ranks_per_node", "must be at least 1, got %d", a.RanksPerNode)
	}
	if !v.given(k + "min_bytes") {
		a.MinBytes = 1 << 20
	}
	if !v.given(k + "max_bytes") {
		a.MaxBytes = 8 << 30
	}
	if a.MinBytes <= 0 || a.MaxBytes < a.MinBytes {
		v.problem(k+"max_bytes", "the sweep must go from min_bytes > 0 up to max_bytes ≥ min_bytes, got %s..%s", a.MinBytes, a.MaxBytes)
	}
	switch a.Launcher {
	case "":
		a.Launcher = "mpirun"
	case "mpirun":
	case "srun":
		if !v.inv.Slurm.Enabled() {
			v.problem(k+"launcher", "srun needs the Slurm login node: set slurm.login.address")
		}
		// Under srun the --mca pairs become OMPI_MCA_ variables; nothing
		// else of mpirun's applies.
		for i := 0; i < len(a.MPIArgs); i += 3 {
			m := a.MPIArgs
			if (m[i] != "--mca" && m[i] != "-mca") || i+2 >= len(m) || !mcaName.MatchString(m[i+1]) {
				v.problem(fmt.Sprintf("%smpi_args[%d]", k, i), "with launcher srun only --mca KEY VALUE triples apply (passed as OMPI_MCA_KEY=VALUE); got %q", short(strings.Join(m[i:min(i+3, len(m))], " ")))
				break
			}
		}
	default:
		v.problem(k+"launcher", "must be mpirun or srun, got %q", short(a.Launcher))
	}
	seen := map[string]bool{}
	for i, c := range a.Collectives {
		key := fmt.Sprintf("%scollectives[%d]", k, i)
		switch {
		case !slices.Contains(Collectives, c):
			v.problem(key, "unknown collective %q: one of %s (all_reduce always runs)", short(c), strings.Join(Collectives, ", "))
		case seen[c]:
			v.problem(key, "%q is listed twice", c)
		}
		seen[c] = true
	}
	b := &a.Bisection
	if !v.given(k + "bisection.max_rounds") {
		b.MaxRounds = 3
	} else if b.MaxRounds < 1 {
		v.problem(k+"bisection.max_rounds", "must be at least 1, got %d", b.MaxRounds)
	}
	if !v.given(k + "bisection.slow_ratio") {
		b.SlowRatio = 0.8
	} else if !(b.SlowRatio > 0 && b.SlowRatio < 1) {
		v.problem(k+"bisection.slow_ratio", "must be between 0 and 1 (a pair below this fraction of the typical pair is slow), got %v", b.SlowRatio)
	}
	if !v.given(k + "bisection.iters") {
		b.Iters = a.Iters
	} else if b.Iters < 1 {
		v.problem(k+"bisection.iters", "must be at least 1, got %d", b.Iters)
	}
	if !v.given(k + "bisection.min_bytes") {
		b.MinBytes = a.MinBytes
	}
	if !v.given(k + "bisection.max_bytes") {
		b.MaxBytes = a.MaxBytes
	}
	if b.MinBytes <= 0 || b.MaxBytes < b.MinBytes {
		v.problem(k+"bisection.max_bytes", "the pair sweep must go from min_bytes > 0 up to max_bytes ≥ min_bytes, got %s..%s", b.MinBytes, b.MaxBytes)
	}
}

var mcaName = regexp.MustCompile(`^[A-Za-z0-9_]+$`)

// Collectives are the nccl-tests collectives a window may add to the
// all-reduce (each is the binary NAME_perf next to the all-reduce's).
var Collectives = []string{"all_gather", "reduce_scatter", "alltoall", "sendrecv"}

// slurm checks the Slurm section: all or nothing, and a login node to run
// srun from.
func (v *validator) slurm() {
	s := &v.inv.Slurm
	const k = "slurm."
	if !v.given("slurm") {
		return
	}
	if msg := checkAddress(s.Login.Address); msg != "" {
		v.problem(k+"login.address", "%s (the Slurm login node srun runs on)", msg)
	}
	if v.given(k+"login.port") && (s.Login.Port < 1 || s.Login.Port > 65535) {
		v.problem(k+"login.port", "must be 1..65535, got %d", s.Login.Port)
	}
	if s.Login.User == "" {
		s.Login.User = v.inv.SSH.User
	}
	if s.Login.User == "" {
		v.problem(k+"login.user", "required: ssh.user is not set")
	}
	if s.MPI == "" {
		s.MPI = "pmix"
	} else if strings.ContainsAny(s.MPI, " \t'\"") {
		v.problem(k+"mpi", "%q is not an srun --mpi plugin name", short(s.MPI))
	}
	v.nonNegativeDuration(k+"timeout", s.Timeout)
}

func (v *validator) nonNegativeInt(key string, n int) {
	if n < 0 {
		v.problem(key, "must not be negative, got %d", n)
	}
}

func (v *validator) nonNegativeNumber(key string, f float64) {
	switch {
	case math.IsNaN(f) || math.IsInf(f, 0):
		v.problem(key, "must be a finite number, got %v", f)
	case f < 0:
		v.problem(key, "must not be negative, got %v", f)
	}
}

func (v *validator) nonNegativeDuration(key string, d time.Duration) {
	if d < 0 {
		v.problem(key, "must not be negative, got %v", d)
	}
}
