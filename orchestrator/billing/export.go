// Package billing reads a provider's usage export (AWS Cost and Usage
// Report, legacy and 2.0; Google Cloud's billing export; Azure cost
// details; a generic CSV or JSON whose columns the inventory maps) and
// holds it against what a window measured: the runs' own records and
// their cost ledgers. An export is someone else's file: everything read
// is bounded, and a figure it does not give is an error or a named
// warning, never a zero.
package billing

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"gpuaccept/orchestrator/inventory"
)

// Bounds on what one export may hold. A month of hourly lines for a
// thousand nodes is 720,000 lines; an AWS report carries a few hundred
// columns.
const (
	DefaultMaxBytes = 256 << 20
	DefaultMaxLines = 2_000_000
	MaxColumns      = 2048
	maxTags         = 256
)

// Bounds on one line's figures. An export is someone else's file: a
// figure past these is a typo or an attack, and summed it would reach
// +Inf, which no table prints and JSON cannot hold. A line bills at most
// a node-year of time (a GPU unit at most a year of each of
// maxGPUsPerNode GPUs); no line of a GPU window costs 1e12 of any
// currency.
const (
	maxLineSecs    = 366 * 24 * 3600
	maxGPUsPerNode = 64
	maxLineCost    = 1e12
	// maxQuantity bounds a quantity whose unit is not time (GB,
	// requests).
	maxQuantity = 1e15
)

// Format is the export's layout.
type Format string

const (
	AWSLegacy   Format = "aws-cur"      // lineItem/UsageStartDate, ...
	AWSCUR2     Format = "aws-cur2"     // line_item_usage_start_date, ...
	GCP         Format = "gcp"          // usage_start_time, usage.amount, ...
	Azure       Format = "azure"        // cost details: Date, Quantity, CostInBillingCurrency, ...
	AzureLegacy Format = "azure-usage"  // pay-as-you-go usage: UsageDateTime, UsageQuantity, PreTaxCost, ...
	Generic     Format = "generic"      // billing.columns (or their default names)
	GenericJSON Format = "generic-json" // a JSON array of objects keyed as billing.columns
)

// Columns maps the generic format's fields to the export's column names
// (billing.columns). An empty field takes its own name as the column.
type Columns struct {
	Resource string `json:"resource,omitempty"`
	Start    string `json:"start,omitempty"`
	End      string `json:"end,omitempty"`
	Quantity string `json:"quantity,omitempty"`
	Unit     string `json:"unit,omitempty"`
	Cost     string `json:"cost,omitempty"`
	Currency string `json:"currency,omitempty"`
	Rate     string `json:"rate,omitempty"`
	Item     string `json:"item,omitempty"`
	Tags     string `json:"tags,omitempty"`
}

// Fields are the generic format's field names, in the order a header
// lists them by default: the inventory's billing.columns keys.
var Fields = inventory.BillingFields

// ColumnsFrom is billing.columns as the reader takes it; nil when the
// inventory maps none.
func ColumnsFrom(m map[string]string) *Columns {
	if len(m) == 0 {
		return nil
	}
	return &Columns{Resource: m["resource"], Start: m["start"], End: m["end"], Quantity: m["quantity"], Unit: m["unit"],
		Cost: m["cost"], Currency: m["currency"], Rate: m["rate"], Item: m["item"], Tags: m["tags"]}
}

// named: billing.columns names field's column.
func (c Columns) named(field string) bool { return c.raw(field) != "" }

func (c Columns) raw(field string) string {
	return map[string]string{"resource": c.Resource, "start": c.Start, "end": c.End, "quantity": c.Quantity,
		"unit": c.Unit, "cost": c.Cost, "currency": c.Currency, "rate": c.Rate, "item": c.Item, "tags": c.Tags}[field]
}

func (c Columns) get(field string) string {
	v := c.raw(field)
	if v == "" {
		return field
	}
	return v
}

// Options say how to read an export. Zero values take the defaults.
type Options struct {
	// Columns is billing.columns; set, it names the generic format's
	// columns, and a column it names that the export lacks is an error.
	Columns *Columns
	// MaxBytes and MaxLines bound what is read.
	MaxBytes int64
	MaxLines int
}

// Line is one billed line, in the export's own terms.
type Line struct {
	// Row is the line of the export's file its record starts on (the
	// header's is 1; a quoted field may span lines, so it is not the
	// record's count); a JSON export counts its objects from 1.
	Row int
	// Resource is what the line bills (an instance or resource ID, a host
	// name); Name is a second name the export gives it (Azure's
	// ResourceName, Google's resource.name beside its global name).
	Resource, Name string
	// Start and End bound the usage; Daily marks a line that only names
	// its day (Azure), whose End is the day's end.
	Start, End time.Time
	Daily      bool
	Quantity   float64
	Unit       string
	Cost       float64
	Currency   string
	// Rate is the unit price the export states (0: it states none).
	Rate float64
	// Item is what kind of usage it is (usage type, SKU, meter).
	Item string
	Tags map[string]string
}

// Warning is something read that the reconciliation must not pass over
// silently; Code names it.
type Warning struct {
	Code string // e.g. "no-zone", "not-time"
	Text string
}

// Warning codes.
const (
	WarnNoZone  = "no-zone" // times without a zone, read as UTC
	WarnSkipped = "skipped" // tax, credit and adjustment lines, left out of the reconciliation
)

// Export is a read export.
type Export struct {
	Format   Format
	Currency string
	Lines    []Line
	Warnings []Warning
}

// Read reads an export of any supported format, telling them apart by
// the header.
func Read(r io.Reader, o Options) (*Export, error) {
	maxBytes := o.MaxBytes
	if maxBytes <= 0 {
		maxBytes = DefaultMaxBytes
	}
	lr := &limitReader{r: r, left: maxBytes}
	br := bufio.NewReader(lr)
	// A UTF-8 byte order mark (Azure's exports carry one) is no part of
	// the first column's name.
	if b, err := br.Peek(3); err == nil && bytes.Equal(b, []byte{0xEF, 0xBB, 0xBF}) {
		_, _ = br.Discard(3)
	}
	first, lead, err := firstByte(br)
	if err != nil {
		return nil, err
	}
	var ex *Export
	if first == '[' {
		ex, err = readJSON(br, o)
	} else {
		ex, err = readCSV(br, o, lead)
	}
	if lr.over {
		return nil, fmt.Errorf("the export is larger than %d bytes: split it by day or raise the bound", maxBytes)
	}
	if err != nil {
		return nil, err
	}
	if err := oneCurrency(ex); err != nil {
		return nil, err
	}
	return ex, nil
}

// limitReader ends the export at left bytes and remembers that it did,
// so a cut export is an error, not a shorter bill.
type limitReader struct {
	r    io.Reader
	left int64
	over bool
}

func (l *limitReader) Read(p []byte) (int, error) {
	if l.left <= 0 {
		// One byte more says whether the export ends here.
		var b [1]byte
		n, err := l.r.Read(b[:])
		if n > 0 {
			l.over = true
			return 0, errors.New("export too large")
		}
		return 0, err
	}
	if int64(len(p)) > l.left {
		p = p[:l.left]
	}
	n, err := l.r.Read(p)
	l.left -= int64(n)
	return n, err
}

// firstByte is the export's first byte that is not blank, and the lines
// skipped before it: the CSV reader counts its lines from there, and a
// line number the buyer looks up is the file's.
func firstByte(br *bufio.Reader) (first byte, lines int, err error) {
	for {
		b, err := br.ReadByte()
		if err == io.EOF {
			return 0, 0, errors.New("the export is empty")
		}
		if err != nil {
			return 0, 0, err
		}
		if b == '\n' {
			lines++
		}
		if b == ' ' || b == '\t' || b == '\r' || b == '\n' {
			continue
		}
		return b, lines, br.UnreadByte()
	}
}

// layout is where a format keeps each field: the header names it may
// carry, the first present wins.
type layout struct {
	format Format
	// detect: every one of these columns is present.
	detect []string
	fields map[string][]string
	// tagColumns: a column whose name starts with one of these holds one
	// tag (AWS's resourceTags/user:team), the rest of the name its key.
	tagColumns []string
}

var layouts = []layout{
	{format: AWSLegacy, detect: []string{"lineItem/UsageStartDate", "lineItem/UnblendedCost"},
		fields: map[string][]string{
			"resource": {"lineItem/ResourceId"}, "start": {"lineItem/UsageStartDate"}, "end": {"lineItem/UsageEndDate"},
			"quantity": {"lineItem/UsageAmount"}, "unit": {"pricing/unit"}, "cost": {"lineItem/UnblendedCost"},
			"currency": {"lineItem/CurrencyCode"}, "rate": {"lineItem/UnblendedRate"}, "item": {"lineItem/UsageType"},
			"type": {"lineItem/LineItemType"},
		},
		tagColumns: []string{"resourceTags/"}},
	{format: AWSCUR2, detect: []string{"line_item_usage_start_date", "line_item_unblended_cost"},
		fields: map[string][]string{
			"resource": {"line_item_resource_id"}, "start": {"line_item_usage_start_date"}, "end": {"line_item_usage_end_date"},
			"quantity": {"line_item_usage_amount"}, "unit": {"pricing_unit"}, "cost": {"line_item_unblended_cost"},
			"currency": {"line_item_currency_code"}, "rate": {"line_item_unblended_rate"}, "item": {"line_item_usage_type"},
			"type": {"line_item_line_item_type"}, "tags": {"resource_tags"},
		},
		tagColumns: []string{"resource_tags_"}},
	// Google's export lives in BigQuery; a CSV of it is a SELECT of its
	// schema's fields, named by their paths (usage.amount) or, as
	// BigQuery flattens them, with underscores (usage_amount).
	{format: GCP, detect: []string{"usage_start_time", "cost"},
		fields: map[string][]string{
			"resource": {"resource.global_name", "resource_global_name"}, "name": {"resource.name", "resource_name"},
			"start": {"usage_start_time"}, "end": {"usage_end_time"},
			"quantity": {"usage.amount", "usage_amount"}, "unit": {"usage.unit", "usage_unit"}, "cost": {"cost"},
			"currency": {"currency"}, "item": {"sku.description", "sku_description"}, "tags": {"labels"},
			"type": {"cost_type"},
		}},
	{format: Azure, detect: []string{"Date", "Quantity", "MeterId"},
		fields: map[string][]string{
			"resource": {"ResourceId", "InstanceName"}, "name": {"ResourceName"}, "start": {"Date"},
			"quantity": {"Quantity"}, "unit": {"UnitOfMeasure"}, "cost": {"CostInBillingCurrency", "Cost"},
			"currency": {"BillingCurrencyCode", "BillingCurrency", "Currency"}, "rate": {"EffectivePrice"},
			"item": {"MeterName"}, "tags": {"Tags"}, "type": {"ChargeType"},
		}},
	{format: AzureLegacy, detect: []string{"UsageDateTime", "PreTaxCost"},
		fields: map[string][]string{
			"resource": {"InstanceId"}, "start": {"UsageDateTime"}, "quantity": {"UsageQuantity"},
			"unit": {"UnitOfMeasure"}, "cost": {"PreTaxCost"}, "currency": {"Currency"}, "rate": {"ResourceRate"},
			"item": {"MeterName"}, "tags": {"Tags"},
		}},
}

// genericLayout is the generic format as c maps it.
func genericLayout(c Columns) layout {
	l := layout{format: Generic, fields: map[string][]string{}}
	for _, f := range Fields {
		l.fields[f] = []string{c.get(f)}
	}
	l.detect = []string{c.get("resource"), c.get("start"), c.get("cost")}
	return l
}

// canonical is a header cell as its column's name: a localized header
// ("Abonnement-GUID (SubscriptionGuid)") names it in its last
// parentheses.
func canonical(cell string) string {
	cell = strings.TrimSpace(cell)
	if strings.HasSuffix(cell, ")") {
		if i := strings.LastIndex(cell, "("); i > 0 {
			inner := strings.TrimSpace(cell[i+1 : len(cell)-1])
			if inner != "" && !strings.ContainsAny(inner, " ()") {
				return inner
			}
		}
	}
	return cell
}

// readCSV reads a CSV export whose first lead lines were blank.
func readCSV(br *bufio.Reader, o Options, lead int) (*Export, error) {
	cr := csv.NewReader(br)
	cr.ReuseRecord = true
	// fileLine is the file's line a CSV error names: the reader counts
	// from the first line it was given.
	fileLine := func(err error) error {
		var pe *csv.ParseError
		if errors.As(err, &pe) {
			pe.StartLine += lead
			pe.Line += lead
		}
		return err
	}
	header, err := cr.Read()
	if err != nil {
		return nil, fmt.Errorf("line %d: the header: %w", lead+1, fileLine(err))
	}
	// ReuseRecord: the rows below overwrite the header's slice.
	header = slices.Clone(header)
	if len(header) > MaxColumns {
		return nil, fmt.Errorf("line %d: %d columns, more than the %d an export has", lead+1, len(header), MaxColumns)
	}
	cols := map[string]int{}
	for i, h := range header {
		name := canonical(h)
		if !utf8.ValidString(name) {
			return nil, fmt.Errorf("line %d: column %d's name is not UTF-8", lead+1, i+1)
		}
		if _, dup := cols[name]; dup {
			return nil, fmt.Errorf("line %d: column %q appears twice", lead+1, clip(name))
		}
		cols[name] = i
	}
	l, err := pick(cols, o.Columns)
	if err != nil {
		return nil, fmt.Errorf("line %d: %w", lead+1, err)
	}
	idx := map[string]int{}
	for f, names := range l.fields {
		for _, n := range names {
			if i, ok := cols[n]; ok {
				idx[f] = i
				break
			}
		}
	}
	var tagCols []int
	for name, i := range cols {
		for _, p := range l.tagColumns {
			if strings.HasPrefix(name, p) && len(name) > len(p) {
				tagCols = append(tagCols, i)
			}
		}
	}
	sort.Ints(tagCols)
	maxLines := o.MaxLines
	if maxLines <= 0 {
		maxLines = DefaultMaxLines
	}
	ex := &Export{Format: l.format}
	rd := &rowReader{ex: ex}
	for {
		rec, err := cr.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fileLine(err)
		}
		// The line the record starts on, not its count: a quoted field
		// (Azure's tags, an item's description) may hold line breaks.
		row, _ := cr.FieldPos(0)
		row += lead
		if len(ex.Lines) >= maxLines {
			return nil, fmt.Errorf("more than %d lines: split the export by day or raise the bound", maxLines)
		}
		get := func(f string) string {
			if i, ok := idx[f]; ok {
				return strings.TrimSpace(rec[i])
			}
			return ""
		}
		ln, keep, err := rd.line(row, l.format, get)
		if err != nil {
			return nil, err
		}
		if !keep {
			continue
		}
		for _, i := range tagCols {
			if v := strings.TrimSpace(rec[i]); v != "" {
				key := canonical(header[i])
				for _, p := range l.tagColumns {
					key = strings.TrimPrefix(key, p)
				}
				if len(ln.Tags) >= maxTags {
					return nil, fmt.Errorf("line %d: more than %d tags", row, maxTags)
				}
				ln.Tags[tagKey(key)] = v
			}
		}
		ex.Lines = append(ex.Lines, ln)
	}
	rd.finish()
	return ex, nil
}

// pick is the layout whose columns the header holds.
func pick(cols map[string]int, mapped *Columns) (layout, error) {
	has := func(names []string) bool {
		for _, n := range names {
			if _, ok := cols[n]; !ok {
				return false
			}
		}
		return true
	}
	if mapped != nil {
		l := genericLayout(*mapped)
		var missing []string
		for _, f := range Fields {
			// The three a line cannot do without are looked for always;
			// another only when billing.columns names it.
			n := mapped.get(f)
			if required := f == "resource" || f == "start" || f == "cost"; required || mapped.named(f) {
				if _, ok := cols[n]; !ok {
					missing = append(missing, fmt.Sprintf("%s (%q)", f, clip(n)))
				}
			}
		}
		if len(missing) > 0 {
			return layout{}, fmt.Errorf("billing.columns names columns the export lacks: %s; it has %s",
				strings.Join(missing, ", "), someColumns(cols))
		}
		return l, nil
	}
	for _, l := range layouts {
		if has(l.detect) {
			return l, nil
		}
	}
	if g := genericLayout(Columns{}); has(g.detect) {
		return g, nil
	}
	return layout{}, fmt.Errorf("unknown export format: its columns (%s) are none of AWS CUR "+
		"(lineItem/UsageStartDate), CUR 2.0 (line_item_usage_start_date), Google Cloud (usage_start_time), "+
		"Azure cost details (Date, Quantity, MeterId), Azure usage (UsageDateTime, PreTaxCost) or the generic "+
		"resource,start,cost: map them with billing.columns", someColumns(cols))
}

func someColumns(cols map[string]int) string {
	names := make([]string, 0, len(cols))
	for n := range cols {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool { return cols[names[i]] < cols[names[j]] })
	more := ""
	if len(names) > 8 {
		more = fmt.Sprintf(", and %d more", len(names)-8)
		names = names[:8]
	}
	for i, n := range names {
		names[i] = strconv.Quote(clip(n))
	}
	return strings.Join(names, ", ") + more
}

// rowReader turns one row's fields into a Line and counts what it must
// warn of once for the whole export.
type rowReader struct {
	ex          *Export
	noZone      []int
	skipped     int
	skippedCost float64
}

// line reads one row; keep is false for a line that bills nothing a
// window used (AWS's and Google's tax and credit lines, which carry no
// usage period of a resource).
func (r *rowReader) line(row int, f Format, get func(string) string) (Line, bool, error) {
	ln := Line{Row: row, Resource: get("resource"), Name: get("name"), Unit: get("unit"), Currency: get("currency"),
		Item: get("item"), Tags: map[string]string{}}
	if t := get("type"); t != "" && skippedType(t) {
		r.skipped++
		if c, err := number(get("cost"), false); err == nil && math.Abs(c) <= maxLineCost {
			r.skippedCost += c
		}
		return ln, false, nil
	}
	if len(ln.Resource) > 2048 || len(ln.Name) > 2048 {
		return ln, false, fmt.Errorf("line %d: a resource ID over 2048 bytes", row)
	}
	var err error
	start := get("start")
	if start == "" {
		return ln, false, fmt.Errorf("line %d: no usage start", row)
	}
	var zoned bool
	if ln.Start, ln.Daily, zoned, err = parseTime(start); err != nil {
		return ln, false, fmt.Errorf("line %d: usage start: %w", row, err)
	}
	if end := get("end"); end != "" {
		var daily, z bool
		if ln.End, daily, z, err = parseTime(end); err != nil {
			return ln, false, fmt.Errorf("line %d: usage end: %w", row, err)
		}
		if daily {
			ln.End = ln.End.Add(24 * time.Hour)
		}
		zoned = zoned && z
		ln.Daily = ln.Daily && daily
	} else if ln.Daily {
		ln.End = ln.Start.Add(24 * time.Hour)
	} else {
		return ln, false, fmt.Errorf("line %d: a usage start with a time of day but no usage end", row)
	}
	if ln.End.Before(ln.Start) {
		return ln, false, fmt.Errorf("line %d: usage ends (%s) before it starts (%s)", row,
			ln.End.Format(time.RFC3339), ln.Start.Format(time.RFC3339))
	}
	if !zoned && !ln.Daily {
		r.noZone = append(r.noZone, row)
	}
	if ln.Cost, err = number(get("cost"), true); err != nil {
		return ln, false, fmt.Errorf("line %d: cost: %w", row, err)
	}
	if math.Abs(ln.Cost) > maxLineCost {
		return ln, false, fmt.Errorf("line %d: cost: %g is beyond %g: no line of a window costs that", row, ln.Cost, maxLineCost)
	}
	if q := get("quantity"); q != "" {
		if ln.Quantity, err = number(q, true); err != nil {
			return ln, false, fmt.Errorf("line %d: quantity: %w", row, err)
		}
	}
	if err := boundTime(ln, f); err != nil {
		return ln, false, fmt.Errorf("line %d: %w", row, err)
	}
	if rt := get("rate"); rt != "" {
		if ln.Rate, err = number(rt, false); err != nil {
			return ln, false, fmt.Errorf("line %d: rate: %w", row, err)
		}
		if math.Abs(ln.Rate) > maxLineCost {
			return ln, false, fmt.Errorf("line %d: rate: %g is beyond %g", row, ln.Rate, maxLineCost)
		}
	}
	if ln.Currency != "" {
		// The code is printed (errors, tables, verdicts) and compared
		// with the quote's: three letters, or the line is refused.
		if !isoCurrency(ln.Currency) {
			return ln, false, fmt.Errorf("line %d: currency %q is not a 3-letter ISO 4217 code", row, clip(ln.Currency))
		}
		ln.Currency = strings.ToUpper(ln.Currency)
	}
	if tags := get("tags"); tags != "" {
		if ln.Tags, err = parseTags(tags); err != nil {
			return ln, false, fmt.Errorf("line %d: tags: %w", row, err)
		}
	}
	return ln, true, nil
}

// boundTime refuses a line whose quantity bills more time than a
// node-year (a GPU unit: a year of maxGPUsPerNode GPUs), or a line
// without a unit whose span is longer; any other quantity past
// maxQuantity.
func boundTime(ln Line, f Format) error {
	if strings.TrimSpace(ln.Unit) == "" {
		if !ln.Daily && ln.End.Sub(ln.Start).Seconds() > maxLineSecs {
			return fmt.Errorf("no unit, and its span %s to %s is longer than a node-year", ln.Start.Format(time.RFC3339),
				ln.End.Format(time.RFC3339))
		}
		return nil
	}
	secs, perGPU, ok := TimeUnit(ln.Unit)
	if !ok {
		if math.Abs(ln.Quantity) > maxQuantity {
			return fmt.Errorf("quantity: %g %s is beyond %g", ln.Quantity, clip(ln.Unit), maxQuantity)
		}
		return nil
	}
	limit := float64(maxLineSecs)
	if perGPU || gpuSKU(f, ln.Item) {
		limit *= maxGPUsPerNode
	}
	if math.Abs(ln.Quantity)*secs > limit {
		return fmt.Errorf("quantity: %g %s is more time than a node-year on one line", ln.Quantity, clip(ln.Unit))
	}
	return nil
}

// isoCurrency: s is three ASCII letters, as ISO 4217 codes are.
func isoCurrency(s string) bool {
	if len(s) != 3 {
		return false
	}
	for _, c := range []byte(s) {
		if (c < 'A' || c > 'Z') && (c < 'a' || c > 'z') {
			return false
		}
	}
	return true
}

func (r *rowReader) finish() {
	if r.skipped > 0 {
		r.ex.Warnings = append(r.ex.Warnings, Warning{Code: WarnSkipped,
			Text: fmt.Sprintf("%d tax, credit or adjustment line(s) (%.2f in all) bill no resource's time: not held against the window", r.skipped, r.skippedCost)})
	}
	if len(r.noZone) > 0 {
		r.ex.Warnings = append(r.ex.Warnings, Warning{Code: WarnNoZone,
			Text: fmt.Sprintf("%d line(s) give times without a zone (line %d first): read as UTC", len(r.noZone), r.noZone[0])})
	}
}

// skippedType: AWS's Tax, Credit and Refund lines, Google's tax and
// adjustment lines and Azure's purchases bill no resource's usage period.
func skippedType(t string) bool {
	switch strings.ToLower(t) {
	case "tax", "credit", "refund", "adjustment", "rounding_error", "bundleddiscount", "edpdiscount", "purchase":
		return true
	}
	return false
}

// time layouts an export writes, zoned first.
var zonedLayouts = []string{time.RFC3339Nano, "2006-01-02T15:04:05Z0700", "2006-01-02 15:04:05Z07:00",
	"2006-01-02 15:04:05.999999999 UTC", "2006-01-02 15:04:05 UTC", "2006-01-02T15:04:05.999999999 UTC"}
var bareLayouts = []string{"2006-01-02T15:04:05.999999999", "2006-01-02 15:04:05.999999999", "2006-01-02T15:04", "2006-01-02 15:04"}

// dayLayouts: Azure names a line's day (MM/DD/YYYY in cost details,
// YYYY-MM-DD in the older usage export).
var dayLayouts = []string{"2006-01-02", "01/02/2006"}

// parseTime reads an export's time: daily when it names only a day,
// zoned when it says its zone (a day is a UTC day, as the providers bill
// it). A named zone other than UTC is refused: Go would read it as an
// offset of zero.
func parseTime(s string) (t time.Time, daily, zoned bool, err error) {
	if len(s) > 64 {
		return t, false, false, fmt.Errorf("%q is no time", clip(s))
	}
	s = strings.Replace(s, " GMT", " UTC", 1)
	for _, l := range zonedLayouts {
		if t, err := time.Parse(l, s); err == nil {
			return t.UTC(), false, true, nil
		}
	}
	for _, l := range bareLayouts {
		if t, err := time.Parse(l, s); err == nil {
			return t, false, false, nil
		}
	}
	for _, l := range dayLayouts {
		if t, err := time.Parse(l, s); err == nil {
			return t, true, true, nil
		}
	}
	return t, false, false, fmt.Errorf("%q is no time this reader knows (RFC 3339, YYYY-MM-DD HH:MM:SS[ UTC], "+
		"YYYY-MM-DD or MM/DD/YYYY)", clip(s))
}

// number reads a figure; empty is an error where required, never a zero.
// A decimal comma is refused rather than guessed (1,500 is 1.5 or 1500).
func number(s string, required bool) (float64, error) {
	if s == "" {
		if required {
			return 0, errors.New("empty")
		}
		return 0, nil
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		if strings.Contains(s, ",") {
			return 0, fmt.Errorf("%q: a decimal or thousands comma; export with a decimal point", clip(s))
		}
		return 0, fmt.Errorf("%q is not a number", clip(s))
	}
	return f, nil
}

// parseTags reads a line's tags: a JSON object ({"team":"ml"}); Azure's
// fragment of one without its braces; Google's array of {key, value};
// or k=v pairs separated by ; or ,.
func parseTags(s string) (map[string]string, error) {
	out := map[string]string{}
	t := strings.TrimSpace(s)
	switch {
	case strings.HasPrefix(t, "["):
		var kv []struct {
			Key   string `json:"key"`
			Value any    `json:"value"`
		}
		if err := json.Unmarshal([]byte(t), &kv); err != nil {
			return nil, fmt.Errorf("not a list of {key, value}: %v", err)
		}
		for _, p := range kv {
			out[tagKey(p.Key)] = fmt.Sprint(p.Value)
		}
	case strings.HasPrefix(t, "{") || strings.HasPrefix(t, `"`):
		if !strings.HasPrefix(t, "{") {
			t = "{" + t + "}"
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(t), &m); err != nil {
			return nil, fmt.Errorf("not a JSON object: %v", err)
		}
		for k, v := range m {
			out[tagKey(k)] = fmt.Sprint(v)
		}
	default:
		for _, p := range strings.FieldsFunc(t, func(r rune) bool { return r == ';' || r == ',' }) {
			k, v, ok := strings.Cut(p, "=")
			if !ok {
				k, v, ok = strings.Cut(p, ":")
			}
			if !ok || strings.TrimSpace(k) == "" {
				return nil, fmt.Errorf("%q is not key=value", clip(p))
			}
			out[tagKey(k)] = strings.TrimSpace(v)
		}
	}
	if len(out) > maxTags {
		return nil, fmt.Errorf("more than %d tags", maxTags)
	}
	return out, nil
}

// tagKey is a tag's key without the prefix AWS gives a user's tags
// (user:team in the legacy report, user_team in CUR 2.0).
func tagKey(k string) string {
	k = strings.TrimSpace(k)
	k = strings.TrimPrefix(k, "user:")
	return strings.TrimPrefix(k, "user_")
}

// oneCurrency: lines in two currencies cannot be summed; the export must
// be converted first.
func oneCurrency(ex *Export) error {
	seen := map[string]int{}
	for _, l := range ex.Lines {
		c := strings.ToUpper(strings.TrimSpace(l.Currency))
		if c == "" {
			continue
		}
		if _, ok := seen[c]; !ok {
			seen[c] = l.Row
		}
	}
	if len(seen) > 1 {
		var parts []string
		for c, row := range seen {
			parts = append(parts, fmt.Sprintf("%s (line %d first)", clip(c), row))
		}
		sort.Strings(parts)
		return fmt.Errorf("mixed currencies: %s; convert the export to one currency", strings.Join(parts, ", "))
	}
	for c := range seen {
		ex.Currency = c
	}
	return nil
}

// readJSON reads the generic format as a JSON array of objects, keyed as
// billing.columns (or by the fields' own names).
func readJSON(br *bufio.Reader, o Options) (*Export, error) {
	c := Columns{}
	if o.Columns != nil {
		c = *o.Columns
	}
	maxLines := o.MaxLines
	if maxLines <= 0 {
		maxLines = DefaultMaxLines
	}
	dec := json.NewDecoder(br)
	dec.UseNumber()
	if _, err := dec.Token(); err != nil {
		return nil, fmt.Errorf("JSON: %w", err)
	}
	ex := &Export{Format: GenericJSON}
	rd := &rowReader{ex: ex}
	for row := 1; dec.More(); row++ {
		if len(ex.Lines) >= maxLines {
			return nil, fmt.Errorf("more than %d lines: split the export by day or raise the bound", maxLines)
		}
		var obj map[string]any
		if err := dec.Decode(&obj); err != nil {
			return nil, fmt.Errorf("JSON object %d: %w", row, err)
		}
		if row == 1 {
			var missing []string
			for _, f := range []string{"resource", "start", "cost"} {
				if _, ok := obj[c.get(f)]; !ok {
					missing = append(missing, fmt.Sprintf("%s (%q)", f, clip(c.get(f))))
				}
			}
			if len(missing) > 0 {
				return nil, fmt.Errorf("JSON object 1: no %s: map the export's keys with billing.columns", strings.Join(missing, ", "))
			}
		}
		get := func(f string) string {
			switch v := obj[c.get(f)].(type) {
			case nil:
				return ""
			case string:
				return strings.TrimSpace(v)
			case json.Number:
				return v.String()
			case bool:
				return strconv.FormatBool(v)
			default:
				b, _ := json.Marshal(v)
				return string(b)
			}
		}
		ln, keep, err := rd.line(row, GenericJSON, get)
		if err != nil {
			return nil, fmt.Errorf("JSON object %s", strings.TrimPrefix(err.Error(), "line "))
		}
		if keep {
			ex.Lines = append(ex.Lines, ln)
		}
	}
	if _, err := dec.Token(); err != nil {
		return nil, fmt.Errorf("JSON: %w", err)
	}
	rd.finish()
	return ex, nil
}

// clip keeps an export's text short in a message.
func clip(s string) string {
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return '?'
		}
		return r
	}, s)
	if r := []rune(s); len(r) > 60 {
		return string(r[:59]) + "…"
	}
	return s
}
