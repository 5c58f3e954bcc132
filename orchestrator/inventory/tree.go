package inventory

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	// The same YAML library viper decodes with, so the tree we take lines
	// from and the values viper decodes come from one parser.
	yaml "go.yaml.in/yaml/v3"
)

const (
	// maxSize bounds what is parsed: an inventory is a few KiB, and the
	// parsers' cost on hostile input grows with size.
	maxSize = 1 << 20
	// maxVisits bounds the walk of the tree: aliases can make a small file
	// expand to a huge one ("billion laughs").
	maxVisits = 100_000
)

// readTree parses data into the root mapping of its single document, or
// records why it cannot and returns nil.
func readTree(data []byte, c *collector) *yaml.Node {
	if len(data) > maxSize {
		c.addAt(0, "", fmt.Sprintf("the file is %d bytes; an inventory is at most %d", len(data), maxSize))
		return nil
	}
	if line, msg := badText(data); msg != "" {
		c.addAt(line, "", msg)
		return nil
	}
	if line := tooDeep(data); line > 0 {
		c.addAt(line, "", fmt.Sprintf("nesting deeper than %d levels ([, { and indentation inside each other); an inventory needs a few", maxDepth))
		return nil
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	err := guard(func() error { return dec.Decode(&doc) })
	if errors.Is(err, io.EOF) {
		c.addAt(1, "", emptyMessage)
		return nil
	}
	if err != nil {
		c.addSyntax(err)
		return nil
	}
	if !singleDocument(dec, c) {
		return nil
	}
	return rootMapping(&doc, c)
}

const emptyMessage = "the inventory is empty: expected a YAML mapping with at least provider, ssh and nodes"

// singleDocument rejects a second document (after ---), which every YAML
// reader here would silently ignore.
func singleDocument(dec *yaml.Decoder, c *collector) bool {
	var next yaml.Node
	err := guard(func() error { return dec.Decode(&next) })
	switch {
	case errors.Is(err, io.EOF):
		return true
	case err != nil:
		c.addSyntax(err)
	default:
		c.addAt(next.Line, "", "a second YAML document (after ---): an inventory is one document")
	}
	return false
}

// rootMapping returns the document's top-level mapping.
func rootMapping(doc *yaml.Node, c *collector) *yaml.Node {
	root := doc
	if doc.Kind == yaml.DocumentNode {
		if len(doc.Content) != 1 {
			c.addAt(1, "", emptyMessage)
			return nil
		}
		root = doc.Content[0]
	}
	if root.Kind == yaml.AliasNode && root.Alias != nil {
		root = root.Alias
	}
	if isNull(root) {
		c.addAt(max(root.Line, 1), "", emptyMessage)
		return nil
	}
	if root.Kind != yaml.MappingNode {
		c.addAt(root.Line, "", "expected a mapping of keys (provider, ssh, nodes, ...) at the top, got "+got(root))
		return nil
	}
	return root
}

var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// syntaxProblem turns the YAML library's "yaml: line N: msg" into a located
// problem.
func syntaxProblem(err error) Problem {
	msg := strings.ReplaceAll(err.Error(), "\n", "; ")
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		n, _ := strconv.Atoi(m[1])
		return Problem{Line: n, Message: "YAML syntax error: " + m[2]}
	}
	return Problem{Message: "YAML syntax error: " + strings.TrimPrefix(msg, "yaml: ")}
}

// badText finds bytes YAML forbids, with their line: the YAML library
// reports these without one.
func badText(data []byte) (line int, msg string) {
	line = 1
	for i := 0; i < len(data); {
		r, size := utf8.DecodeRune(data[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			return line, fmt.Sprintf("not UTF-8 text: invalid byte 0x%02x", data[i])
		case isLineBreak(data, i, r):
			line++
		case r == '\t' || r == '\r':
		case r < 0x20 || r == 0x7f || (r >= 0x80 && r <= 0x9f && r != 0x85):
			return line, fmt.Sprintf("control character %U is not allowed in YAML", r)
		}
		i += size
	}
	return 0, ""
}

// isLineBreak counts lines as the YAML library does: CR LF, LF, a lone CR,
// NEL, LS and PS each end a line.
func isLineBreak(data []byte, i int, r rune) bool {
	switch r {
	case '\n', 0x85, 0x2028, 0x2029:
		return true
	case '\r':
		return i+1 >= len(data) || data[i+1] != '\n'
	}
	return false
}

// guard runs a call into a third-party parser or decoder and turns a panic
// into an error: the YAML library has internal panics reachable from
// malformed input, and a bad inventory must be reported, never crash.
func guard(f func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("the YAML reader failed on this input: %v", r)
		}
	}()
	return f()
}

// docIndex is what the file says where: the line of every key and the node
// of every value, by key path.
type docIndex struct {
	rootLine int
	lines    map[string]int
	values   map[string]*yaml.Node
	// lower maps a lower-cased path to the path as written: viper and its
	// decoder report keys lower-cased.
	lower map[string]string
}

func newDocIndex() *docIndex {
	return &docIndex{lines: map[string]int{}, values: map[string]*yaml.Node{}, lower: map[string]string{}}
}

func (x *docIndex) putKey(path string, line int) {
	if _, ok := x.lines[path]; !ok {
		x.lines[path] = line
	}
	if _, ok := x.lower[strings.ToLower(path)]; !ok {
		x.lower[strings.ToLower(path)] = path
	}
}

// canonical returns path as written in the file when it is there.
func (x *docIndex) canonical(path string) string {
	if _, ok := x.lines[path]; ok {
		return path
	}
	if p, ok := x.lower[strings.ToLower(path)]; ok {
		return p
	}
	return path
}

// line is the line of path, or of its nearest ancestor in the file: a
// missing key is reported where it should have been written.
func (x *docIndex) line(path string) int {
	for p := path; p != ""; p = parentPath(p) {
		if l, ok := x.lines[p]; ok {
			return l
		}
	}
	return x.rootLine
}

// given reports whether the file sets path to a value (null is not one).
func (x *docIndex) given(path string) bool {
	n := x.values[path]
	return n != nil && !isNull(n)
}

// text is the value at path as written, for messages.
func (x *docIndex) text(path string) (string, bool) {
	n := x.values[path]
	if n == nil || n.Kind != yaml.ScalarNode {
		return "", false
	}
	return n.Value, true
}

func parentPath(p string) string {
	if strings.HasSuffix(p, "]") {
		if i := strings.LastIndex(p, "["); i >= 0 {
			return p[:i]
		}
	}
	if i := strings.LastIndex(p, "."); i >= 0 {
		return p[:i]
	}
	return ""
}

func joinKey(parent, key string) string {
	if parent == "" {
		return key
	}
	return parent + "." + key
}

func isNull(n *yaml.Node) bool {
	return n.Kind == 0 || (n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null")
}

// walker checks the tree against the Inventory type before anything is
// decoded: keys exactly as spelled (viper would accept "Provider"), no
// duplicates, mappings and lists where the type has them. It records the
// line of every key on the way. Scalar types are left to the decoder.
type walker struct {
	idx    *docIndex
	c      *collector
	visits int
	// open holds the mappings and lists being walked: an alias back into
	// one of them is a cycle.
	open map[*yaml.Node]bool
}

// indexTree walks the tree; false when the file is too large to decode
// (aliases that expand past maxVisits).
func indexTree(root *yaml.Node, c *collector) bool {
	c.idx.rootLine = root.Line
	w := &walker{idx: c.idx, c: c, open: map[*yaml.Node]bool{}}
	w.walkStruct("", inventoryType, root)
	return w.visits <= maxVisits
}

var inventoryType = reflect.TypeFor[Inventory]()

func (w *walker) walk(path string, t reflect.Type, n *yaml.Node) {
	if n = w.resolve(path, n); n == nil {
		return
	}
	w.idx.values[path] = n
	if isNull(n) {
		return
	}
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Struct:
		w.walkStruct(path, t, n)
	case reflect.Map:
		w.walkMap(path, t, n)
	case reflect.Slice:
		w.walkSlice(path, t, n)
	default:
		if n.Kind != yaml.ScalarNode {
			w.shape(path, t, n)
		}
	}
}

// resolve follows aliases; nil when the walk must stop here.
func (w *walker) resolve(path string, n *yaml.Node) *yaml.Node {
	w.visits++
	if w.visits > maxVisits {
		if w.visits == maxVisits+1 {
			w.c.addAt(0, "", fmt.Sprintf("too many values: aliases expand this file to more than %d", maxVisits))
		}
		return nil
	}
	for hops := 0; n.Kind == yaml.AliasNode; hops++ {
		if n.Alias == nil || hops > 64 {
			w.c.add(path, "broken alias")
			return nil
		}
		n = n.Alias
	}
	if w.open[n] {
		w.c.add(path, "alias refers to a value that contains it")
		return nil
	}
	return n
}

func (w *walker) walkStruct(path string, t reflect.Type, n *yaml.Node) {
	if n.Kind != yaml.MappingNode {
		w.shape(path, t, n)
		return
	}
	fields := schemaFields(t)
	w.open[n] = true
	defer delete(w.open, n)
	for _, e := range w.entries(path, n) {
		child := joinKey(path, e.name)
		w.idx.putKey(child, e.key.Line)
		ft, ok := fields[e.name]
		if !ok {
			w.c.addAt(e.key.Line, child, unknownKeyMessage(e.name, t))
			continue
		}
		w.walk(child, ft, e.value)
	}
}

func (w *walker) walkMap(path string, t reflect.Type, n *yaml.Node) {
	if n.Kind != yaml.MappingNode {
		w.shape(path, t, n)
		return
	}
	w.open[n] = true
	defer delete(w.open, n)
	for _, e := range w.entries(path, n) {
		child := joinKey(path, e.name)
		w.idx.putKey(child, e.key.Line)
		w.walk(child, t.Elem(), e.value)
	}
}

func (w *walker) walkSlice(path string, t reflect.Type, n *yaml.Node) {
	if n.Kind != yaml.SequenceNode {
		w.shape(path, t, n)
		return
	}
	w.open[n] = true
	defer delete(w.open, n)
	for i, item := range n.Content {
		child := fmt.Sprintf("%s[%d]", path, i)
		w.idx.putKey(child, item.Line)
		w.walk(child, t.Elem(), item)
	}
}

func (w *walker) shape(path string, t reflect.Type, n *yaml.Node) {
	msg := "expected " + want(t) + ", got " + got(n)
	if t.Kind() == reflect.Slice && n.Kind == yaml.ScalarNode {
		msg += "; write it as a list: [" + short(n.Value) + "]"
	}
	w.c.add(path, msg)
}

type entry struct {
	name       string
	key, value *yaml.Node
}

// entries lists a mapping's keys with merges (<<: *anchor) applied; a key
// written in the mapping wins over a merged one, as in YAML.
func (w *walker) entries(path string, n *yaml.Node) []entry {
	var out []entry
	seen := map[string]int{}
	var merges []*yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if isMergeKey(k) {
			merges = append(merges, v)
			continue
		}
		name, ok := w.keyName(path, k)
		if !ok {
			continue
		}
		if first, dup := seen[name]; dup {
			w.c.addAt(k.Line, joinKey(path, name), fmt.Sprintf("duplicate key (first given at line %d)", first))
			continue
		}
		seen[name] = k.Line
		out = append(out, entry{name, k, v})
	}
	for _, m := range merges {
		out = w.merge(path, m, seen, out)
	}
	return out
}

// merge adds the keys of a merged mapping (or list of mappings) that the
// mapping does not set itself.
func (w *walker) merge(path string, m *yaml.Node, seen map[string]int, out []entry) []entry {
	if m = w.resolve(path, m); m == nil {
		return out
	}
	switch m.Kind {
	case yaml.MappingNode:
		w.open[m] = true
		defer delete(w.open, m)
		for _, e := range w.entries(path, m) {
			if _, ok := seen[e.name]; !ok {
				seen[e.name] = e.key.Line
				out = append(out, e)
			}
		}
	case yaml.SequenceNode:
		w.open[m] = true
		defer delete(w.open, m)
		for _, item := range m.Content {
			out = w.merge(path, item, seen, out)
		}
	default:
		w.c.addAt(m.Line, path, "a merge (<<) needs a mapping or a list of mappings, got "+got(m))
	}
	return out
}

func isMergeKey(k *yaml.Node) bool {
	return k.Kind == yaml.ScalarNode && k.Value == "<<" && k.ShortTag() == "!!merge"
}

// keyName returns a mapping key, which must be a string.
func (w *walker) keyName(path string, k *yaml.Node) (string, bool) {
	if k.Kind == yaml.AliasNode && k.Alias != nil {
		k = k.Alias
	}
	if k.Kind != yaml.ScalarNode {
		w.c.addAt(k.Line, path, "a key must be a string, got "+got(k))
		return "", false
	}
	if k.ShortTag() != "!!str" {
		w.c.addAt(k.Line, joinKey(path, k.Value), fmt.Sprintf("a key must be a string, got %s; quote it: %q", short(k.Value), k.Value))
		return "", false
	}
	return k.Value, true
}

// schemaFields maps each key of a struct type to its field type, by the
// mapstructure tag the decoder uses.
func schemaFields(t reflect.Type) map[string]reflect.Type {
	fields := map[string]reflect.Type{}
	for f := range t.Fields() {
		if name := tagName(f); name != "" {
			fields[name] = f.Type
		}
	}
	return fields
}

func tagName(f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("mapstructure"), ",")
	if name == "-" {
		return ""
	}
	return name
}

// unknownKeyMessage names the key meant when there is a close one, and
// otherwise lists the keys allowed here.
func unknownKeyMessage(name string, t reflect.Type) string {
	var keys []string
	for f := range t.Fields() {
		if k := tagName(f); k != "" {
			keys = append(keys, k)
		}
	}
	if best := closest(name, keys); best != "" {
		return fmt.Sprintf("unknown key; did you mean %q?", best)
	}
	return "unknown key; expected one of: " + strings.Join(keys, ", ")
}

// closest is the key a typo most likely meant: same letters in another
// case, or at most two edits away.
func closest(name string, keys []string) string {
	best, bestD := "", 3
	for _, k := range keys {
		if strings.EqualFold(k, name) {
			return k
		}
		if d := editDistance(strings.ToLower(name), k); d < bestD && d < len(k) {
			best, bestD = k, d
		}
	}
	return best
}

func editDistance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		return 1 << 30 // nothing that long is a typo of a key
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// got describes a node for "expected X, got Y".
func got(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		if n.ShortTag() == "!!str" {
			return strconv.Quote(short(n.Value))
		}
		return short(n.Value)
	}
	return "an alias"
}

// short cuts a value quoted in a message to a readable length.
func short(s string) string {
	const limit = 60
	if utf8.RuneCountInString(s) <= limit {
		return s
	}
	return string([]rune(s)[:limit]) + "..."
}
