package phases

import (
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"gpuaccept/orchestrator/parse"
)

// GPU-004: is the node's GPU the SXM module or the PCIe card the quote
// names? Most product names do not say (the H200 SXM is "NVIDIA H200",
// the H100 SXM5 "NVIDIA H100 80GB HBM3"), so four things are read, each
// of which can decide it: the product name when it says, the board part
// number's family, the board's max power limit against the SKUs of that
// product, and a full NVLink mesh. When they disagree, or none decides,
// the form factor is not told and the reason says what was read.

const (
	formSXM  = "SXM"
	formPCIe = "PCIe"
	// formNeither is a board that is neither (the GH200 superchip): it
	// decides that the quote's SXM or PCIe cannot be confirmed.
	formNeither = "neither"
)

// boardFamilies are families of NVIDIA board part numbers and the form
// factor of every board in each. Only families seen in genuine nvidia-smi
// -q outputs are listed:
//   - 692-2G520: H100 80GB HBM3 (692-2G520-0200-000, shared/samples gpud-q-8xH100-*,
//     exporter-q-h100-*), H800 (692-2G520-0205-000, q-i0-H800-*), H200 (692-2G520-0282-000,
//     h200-580.159.04-q-*): the SXM5 module of the HGX H100/H200 baseboards.
//   - 692-2G506: A100-SXM4-40GB (692-2G506-0200-002, GPU part 20B0) and A100-SXM4-80GB
//     (692-2G506-0210-002, 692-2G506-0212-005, GPU part 20B2) in public nvidia-smi -q captures.
//   - 900-2G133: the A10 (900-2G133-0020-100, shared/samples gpud-q-1xA10-*) and the A10G
//     (900-2G133-A840-000, a public -q capture); the L40S is sold as 900-2G133-0080-000.
//   - 900-2G530: GH200 (900-2G530-0060-000, GPU part 2342, a public -q capture): the Grace
//     Hopper superchip module, neither SXM nor PCIe.
var boardFamilies = []struct {
	prefix, form, what string
}{
	{"692-2G520-", formSXM, "the SXM5 module board of the H100, H800 and H200"},
	{"692-2G506-", formSXM, "the A100's SXM4 module board"},
	{"900-2G133-", formPCIe, "a PCIe card board (A10, A10G, L40S)"},
	{"900-2G530-", formNeither, "the GH200 Grace Hopper superchip module, neither SXM nor PCIe"},
}

// skuPower is one SKU of a product and the max power limit its board
// allows (NVIDIA's datasheets' maximum TDP, which is what nvidia-smi's
// "Max Power Limit" reports on these boards: 700 W on the H100 and H200
// SXM samples, 150 W on the A10's).
type skuPower struct {
	label string
	form  string
	maxW  float64
}

// productPower: the SKUs of a product that share a product name, or whose
// names do not say the form factor. H100: SXM5 700 W, PCIe 350 W, NVL
// 400 W; H200: SXM 700 W, NVL (a PCIe card) 600 W; A100: SXM4 400 W,
// PCIe 300 W (80 GB) and 250 W (40 GB); B200: only the HGX/DGX module,
// 1,000 W (no PCIe B200 exists).
var productPower = []struct {
	name *regexp.Regexp // matches the product name nvidia-smi prints
	skus []skuPower
}{
	{regexp.MustCompile(`\bH100\b`), []skuPower{{"H100 SXM", formSXM, 700}, {"H100 PCIe", formPCIe, 350}, {"H100 NVL", formPCIe, 400}}},
	{regexp.MustCompile(`\bH200\b`), []skuPower{{"H200 SXM", formSXM, 700}, {"H200 NVL", formPCIe, 600}}},
	{regexp.MustCompile(`\bA100\b`), []skuPower{{"A100 SXM4", formSXM, 400}, {"A100 80GB PCIe", formPCIe, 300}, {"A100 40GB PCIe", formPCIe, 250}}},
	{regexp.MustCompile(`\bB200\b`), []skuPower{{"B200", formSXM, 1000}}},
}

// formSign is one reading that decides a form factor, and how.
type formSign struct {
	form, why string
}

// formFactor decides the node's form factor from every GPU's readings and
// the topology; the second value says how (decided) or what was read
// (not decided).
func formFactor(f *Facts) (string, string) {
	var signs []formSign
	var read []string
	note := func(s string) {
		if !slices.Contains(read, s) {
			read = append(read, s)
		}
	}
	for _, g := range f.GPUs {
		gs, what := gpuFormSigns(g)
		for _, s := range gs {
			if !slices.Contains(signs, s) {
				signs = append(signs, s)
			}
		}
		note(what)
	}
	// PCIe cards use bridges, which show as NV links only in pairs: a full
	// NVLink mesh over more than two GPUs is SXM.
	if f.NVLink && f.GPUCount > 2 {
		signs = append(signs, formSign{formSXM, "NVLink between GPUs (nvidia-smi topo -m)"})
	} else if f.GPUCount <= 1 {
		note("no NVLink peers (one GPU)")
	}
	var forms, whys []string
	for _, s := range signs {
		if !slices.Contains(forms, s.form) {
			forms = append(forms, s.form)
		}
		if !slices.Contains(whys, s.why) {
			whys = append(whys, s.why)
		}
	}
	switch {
	case len(forms) == 1 && forms[0] != formNeither:
		return forms[0], joinSome(whys)
	case len(forms) == 1:
		return "", joinSome(whys)
	case len(forms) > 1:
		return "", "the readings disagree: " + joinSome(whys)
	}
	return "", joinSome(read)
}

// joinSome joins the first few distinct readings: GPUs that each say
// something else (a mixed or hostile node) must not make the detail long.
func joinSome(list []string) string {
	const most = 4
	if len(list) <= most {
		return strings.Join(list, "; ")
	}
	return strings.Join(list[:most], "; ") + fmt.Sprintf("; and %d more", len(list)-most)
}

// gpuFormSigns reads one GPU: the signs that decide its form factor, and
// what was read, for the reason when nothing decides.
func gpuFormSigns(g GPUFact) ([]formSign, string) {
	var signs []formSign
	// The node's own words are bounded before they join the evidence.
	name, board := clip(strings.TrimSpace(g.Name), 80), clip(g.BoardPart, 40)
	upper := strings.ToUpper(g.Name)
	switch {
	case strings.Contains(upper, "PCIE"):
		signs = append(signs, formSign{formPCIe, "product name " + name})
	case strings.Contains(upper, "SXM"):
		signs = append(signs, formSign{formSXM, "product name " + name})
	case strings.HasSuffix(upper, " NVL"):
		// The NVL SKUs (H100 NVL, H200 NVL) are PCIe cards whose pairs or
		// quads are bridged by NVLink.
		signs = append(signs, formSign{formPCIe, "product name " + name + ": the NVL SKUs are PCIe cards"})
	}
	read := []string{name}
	if name == "" {
		read[0] = "no product name"
	}
	switch fam := boardFamilyOf(g.BoardPart); {
	case g.BoardPart == "":
		read = append(read, "no board part number")
	case fam < 0:
		read = append(read, "board part number "+board+" (a family not known)")
	default:
		b := boardFamilies[fam]
		signs = append(signs, formSign{b.form, fmt.Sprintf("board part number %s: %s (%s)",
			board, b.what, strings.TrimSuffix(b.prefix, "-"))})
	}
	if s, what := powerSign(g); s != nil {
		signs = append(signs, *s)
	} else {
		read = append(read, what)
	}
	return signs, strings.Join(read, ", ")
}

func boardFamilyOf(part string) int {
	for i, b := range boardFamilies {
		if strings.HasPrefix(part, b.prefix) {
			return i
		}
	}
	return -1
}

// powerSign compares the GPU's max power limit with its product's SKUs: a
// limit that only SKUs of one form factor have decides it.
func powerSign(g GPUFact) (*formSign, string) {
	if g.MaxPowerW <= 0 {
		return nil, "no max power limit"
	}
	limit := fmt.Sprintf("%s W max power limit", trimW(g.MaxPowerW))
	var skus []skuPower
	for _, p := range productPower {
		if p.name.MatchString(g.Name) {
			skus = p.skus
			break
		}
	}
	if skus == nil {
		return nil, limit + " (no SKU table for this product)"
	}
	var match, others []skuPower
	for _, s := range skus {
		if math.Abs(s.maxW-g.MaxPowerW) < 0.5 {
			match = append(match, s)
		} else {
			others = append(others, s)
		}
	}
	var all []string
	for _, s := range skus {
		all = append(all, fmt.Sprintf("%s %s W", s.label, trimW(s.maxW)))
	}
	if len(match) == 0 {
		return nil, limit + ", no SKU's (" + strings.Join(all, ", ") + ")"
	}
	form := match[0].form
	var labels []string
	for _, s := range match {
		if s.form != form {
			return nil, limit + ", shared by SKUs of both form factors (" + strings.Join(all, ", ") + ")"
		}
		labels = append(labels, s.label)
	}
	why := fmt.Sprintf("%s: the %s's", limit, strings.Join(labels, " and "))
	var tail []string
	for _, s := range others {
		switch {
		case s.form == form:
		case s.maxW < g.MaxPowerW:
			tail = append(tail, fmt.Sprintf("the %s is limited to %s W", s.label, trimW(s.maxW)))
		default:
			tail = append(tail, fmt.Sprintf("the %s allows %s W", s.label, trimW(s.maxW)))
		}
	}
	if len(tail) == 0 {
		tail = append(tail, "it has no "+otherForm(form)+" SKU")
	}
	return &formSign{form, why + "; " + strings.Join(tail, ", ")}, ""
}

func otherForm(form string) string {
	if form == formSXM {
		return formPCIe
	}
	return formSXM
}

// trimW prints 700 as "700" and 72.5 as "72.5".
func trimW(w float64) string {
	return strings.TrimSuffix(strings.TrimRight(fmt.Sprintf("%.1f", w), "0"), ".")
}

// maxPowerFromCSV fills the max power limit of the GPUs -q did not give
// it for (-q unreadable, the GPUs known from -L) from preflight's
// --query-gpu, matched by index.
func (f *Facts) maxPowerFromCSV(c parse.CSV) {
	for _, row := range c.Rows {
		i, err := strconv.Atoi(row["index"])
		if err != nil || i < 0 || i >= len(f.GPUs) || f.GPUs[i].MaxPowerW > 0 || f.GPUs[i].Index != i {
			continue
		}
		w, err := parse.CSVWatts(row["power.max_limit"])
		if err != nil {
			f.Problems = append(f.Problems, fmt.Sprintf("nvidia-smi --query-gpu: GPU %d: power.max_limit: %v", i, err))
			continue
		}
		f.GPUs[i].MaxPowerW = w
	}
}
