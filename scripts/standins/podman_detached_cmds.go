package standins

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"text/tabwriter"
	"text/template"
	"time"
)

// The commands that read detached containers: ps, logs, inspect (podman 4.3's words).

// cutFlag reads a flag that takes a value from args[i] ("-t 5", "-t=5", "--time=5"): the value, how many
// arguments it took, whether it is one of names.
func cutFlag(args []string, i int, names ...string) (string, int, bool, error) {
	a, v, hasV := strings.Cut(args[i], "=")
	for _, n := range names {
		if a != n {
			continue
		}
		if hasV {
			return v, 1, true, nil
		}
		if i+1 >= len(args) {
			return "", 0, true, fmt.Errorf("flag needs an argument: %s", a)
		}
		return args[i+1], 2, true, nil
	}
	return "", 0, false, nil
}

func usageError(stderr io.Writer, cmd string, err error) int {
	fmt.Fprintf(stderr, "Error: %v\nSee 'podman %s --help'\n", err, cmd)
	return 125
}

// psRow is what a ps --format template sees, with podman's field names.
type psRow struct {
	ID, Names, Image, ImageID, Command, State, Status string
	Labels                                            map[string]string
	Pid, ExitCode                                     int
	Exited                                            bool
	CreatedAt                                         time.Time
}

func podmanPs(store string, args []string, stdout, stderr io.Writer) int {
	all, quiet, noTrunc := false, false, false
	format := ""
	var filters []string
	for i := 0; i < len(args); {
		switch a := args[i]; a {
		case "-a", "--all":
			all, i = true, i+1
			continue
		case "-q", "--quiet":
			quiet, i = true, i+1
			continue
		case "--no-trunc":
			noTrunc, i = true, i+1
			continue
		}
		if v, n, ok, err := cutFlag(args, i, "--format"); ok {
			if err != nil {
				return usageError(stderr, "ps", err)
			}
			format, i = v, i+n
			continue
		}
		if v, n, ok, err := cutFlag(args, i, "-f", "--filter"); ok {
			if err != nil {
				return usageError(stderr, "ps", err)
			}
			filters, i = append(filters, v), i+n
			continue
		}
		return usageError(stderr, "ps", fmt.Errorf("unknown flag: %s", args[i]))
	}
	match, err := ctrFilter(filters)
	if err != nil {
		fmt.Fprintf(stderr, "Error: %v\n", err)
		return 125
	}
	var rows []psRow
	for _, c := range containers(store) {
		if (!all && c.state.Status != ctrRunning) || !match(c) {
			continue
		}
		rows = append(rows, c.psRow(noTrunc))
	}
	switch {
	case quiet:
		for _, r := range rows {
			fmt.Fprintln(stdout, r.ID)
		}
	case format == "json":
		out := []map[string]any{}
		for _, r := range rows {
			out = append(out, map[string]any{"Id": r.ID, "Names": []string{r.Names}, "Image": r.Image,
				"ImageID": r.ImageID, "Command": strings.Fields(r.Command), "State": r.State, "Status": r.Status,
				"Labels": r.Labels, "Pid": r.Pid, "ExitCode": r.ExitCode, "Exited": r.Exited,
				"CreatedAt": r.CreatedAt.Format("2006-01-02 15:04:05.999999999 -0700 MST")})
		}
		b, _ := json.MarshalIndent(out, "", "    ")
		fmt.Fprintf(stdout, "%s\n", b)
	case format != "":
		tmpl, err := template.New("ps").Funcs(templateFuncs).Parse(strings.TrimPrefix(format, "table "))
		if err != nil {
			fmt.Fprintf(stderr, "Error: template: %v\n", err)
			return 125
		}
		for _, r := range rows {
			var b bytes.Buffer
			if err := tmpl.Execute(&b, r); err != nil {
				fmt.Fprintf(stderr, "Error: template: %v\n", err)
				return 125
			}
			fmt.Fprintln(stdout, b.String())
		}
	default:
		tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "CONTAINER ID\tIMAGE\tCOMMAND\tCREATED\tSTATUS\tPORTS\tNAMES")
		for _, r := range rows {
			cmd := r.Command
			if !noTrunc && len(cmd) > 20 {
				cmd = cmd[:17] + "..."
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s ago\t%s\t\t%s\n", r.ID, r.Image, cmd, humanDuration(time.Since(r.CreatedAt)), r.Status, r.Names)
		}
		tw.Flush()
	}
	return 0
}

var templateFuncs = template.FuncMap{"json": func(v any) string { b, _ := json.Marshal(v); return string(b) }}

func (c *container) psRow(noTrunc bool) psRow {
	id := c.ID
	if !noTrunc {
		id = id[:12]
	}
	r := psRow{ID: id, Names: c.Name, Image: c.ImageName, ImageID: c.ImageID, Command: strings.Join(c.Command, " "),
		State: c.state.Status, Labels: c.Labels, Pid: c.state.Pid, ExitCode: c.state.ExitCode, CreatedAt: c.Created}
	switch c.state.Status {
	case ctrRunning:
		r.Status = "Up " + humanDuration(time.Since(c.state.StartedAt)) + " ago"
	case ctrExited:
		r.Exited = true
		r.Status = fmt.Sprintf("Exited (%d) %s ago", c.state.ExitCode, humanDuration(time.Since(c.state.FinishedAt)))
	default:
		r.Status = "Created"
	}
	return r
}

// humanDuration is docker's go-units HumanDuration, which podman prints, up to days.
func humanDuration(d time.Duration) string {
	switch s := int(d.Seconds()); {
	case s < 1:
		return "Less than a second"
	case s == 1:
		return "1 second"
	case s < 60:
		return fmt.Sprintf("%d seconds", s)
	case d.Minutes() < 2:
		return "About a minute"
	case d.Minutes() < 60:
		return fmt.Sprintf("%d minutes", int(d.Minutes()))
	case d.Hours() < 2:
		return "About an hour"
	case d.Hours() < 48:
		return fmt.Sprintf("%d hours", int(d.Hours()))
	}
	return fmt.Sprintf("%d days", int(d.Hours()/24))
}

// ctrFilter is ps's and rm's --filter: label filters must all match; other keys match any of their values, and
// every key must match.
func ctrFilter(filters []string) (func(*container) bool, error) {
	byKey := map[string][]string{}
	for _, f := range filters {
		k, v, ok := strings.Cut(f, "=")
		switch {
		case !ok:
			return nil, fmt.Errorf("invalid filter %q, should be of form filter=value", f)
		case k != "label" && k != "name" && k != "id" && k != "status":
			return nil, fmt.Errorf("%s is an invalid filter", k)
		}
		byKey[k] = append(byKey[k], v)
	}
	return func(c *container) bool {
		for k, vs := range byKey {
			any := false
			for _, v := range vs {
				var m bool
				switch k {
				case "label":
					lk, lv, hasV := strings.Cut(v, "=")
					got, has := c.Labels[lk]
					m = has && (!hasV || got == lv)
					if !m {
						return false
					}
				case "name":
					re, err := regexp.Compile(v)
					m = err == nil && re.MatchString(c.Name)
				case "id":
					m = strings.HasPrefix(c.ID, v)
				case "status":
					m = c.state.Status == v
				}
				any = any || m
			}
			if !any {
				return false
			}
		}
		return true
	}, nil
}

func podmanLogs(store string, args []string, stdout, stderr io.Writer) int {
	tail := -1
	var refs []string
	for i := 0; i < len(args); {
		if v, n, ok, err := cutFlag(args, i, "--tail"); ok {
			if err != nil {
				return usageError(stderr, "logs", err)
			}
			t, err := strconv.Atoi(v)
			if err != nil {
				return usageError(stderr, "logs", fmt.Errorf("invalid argument %q for \"--tail\" flag: %v", v, err))
			}
			tail, i = t, i+n
			continue
		}
		if strings.HasPrefix(args[i], "-") {
			return usageError(stderr, "logs", fmt.Errorf("unknown flag: %s", args[i]))
		}
		refs, i = append(refs, args[i]), i+1
	}
	if len(refs) != 1 {
		fmt.Fprintln(stderr, "Error: the simulated podman logs one container at a time")
		return 125
	}
	c, err := findContainer(store, refs[0])
	if err != nil {
		fmt.Fprintf(stderr, "Error: %v\n", err)
		return 125
	}
	type line struct {
		stream string
		text   []byte
	}
	var lines []line
	write := func(ls []line) {
		for _, l := range ls {
			if l.stream == "stderr" {
				stderr.Write(l.text)
			} else {
				stdout.Write(l.text)
			}
		}
	}
	f, err := os.Open(filepath.Join(c.dir, "ctr.log"))
	if err == nil {
		defer f.Close()
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 64<<10), k8sLogMaxLine+256)
		for sc.Scan() {
			// TIMESTAMP STREAM F|P TEXT
			parts := bytes.SplitN(sc.Bytes(), []byte(" "), 4)
			if len(parts) < 3 {
				continue
			}
			text := []byte{}
			if len(parts) == 4 {
				text = append(text, parts[3]...)
			}
			if string(parts[2]) == "F" {
				text = append(text, '\n')
			}
			// A partial line joins the next of its stream.
			if n := len(lines); n > 0 && lines[n-1].stream == string(parts[1]) && !bytes.HasSuffix(lines[n-1].text, []byte("\n")) {
				lines[n-1].text = append(lines[n-1].text, text...)
				continue
			}
			lines = append(lines, line{string(parts[1]), text})
			// Only the last line can still grow: the ones before it are written out, or, with --tail,
			// dropped past the last N, so a long log is never held whole.
			if keep := 1 + max(tail, 0); len(lines) > keep {
				drop := lines[:len(lines)-keep]
				if tail < 0 {
					write(drop)
				}
				lines = append(lines[:0:0], lines[len(lines)-keep:]...)
			}
		}
	}
	if tail >= 0 && tail < len(lines) {
		lines = lines[len(lines)-tail:]
	}
	write(lines)
	return 0
}

// ctrInspect is podman's container inspect document, the fields the stand-in knows.
type ctrInspect struct {
	Id        string
	Created   time.Time
	Path      string
	Args      []string
	State     ctrInspectState
	Image     string
	ImageName string
	Name      string
	Config    struct{ Labels map[string]string }
}

type ctrInspectState struct {
	Status                                 string
	Running, Paused, Restarting, OOMKilled bool
	Dead                                   bool
	Pid, ConmonPid, ExitCode               int
	Error                                  string
	StartedAt, FinishedAt                  time.Time
}

func (c *container) inspect() ctrInspect {
	in := ctrInspect{Id: c.ID, Created: c.Created, Path: c.Command[0], Args: c.Command[1:], Image: c.ImageID,
		ImageName: c.ImageName, Name: c.Name, State: ctrInspectState{Status: c.state.Status,
			Running: c.state.Status == ctrRunning, Pid: c.state.Pid, ConmonPid: c.state.MonitorPid, ExitCode: c.state.ExitCode, Error: c.state.Error,
			StartedAt: c.state.StartedAt, FinishedAt: c.state.FinishedAt}}
	in.Config.Labels = c.Labels
	return in
}

// podmanInspectAny is `podman inspect`: containers first, then images (without --format, as image inspect).
func podmanInspectAny(store string, args []string, stdout, stderr io.Writer) int {
	format := ""
	var refs []string
	for i := 0; i < len(args); {
		if v, n, ok, err := cutFlag(args, i, "-f", "--format"); ok {
			if err != nil {
				return usageError(stderr, "inspect", err)
			}
			format, i = v, i+n
			continue
		}
		if _, n, ok, err := cutFlag(args, i, "-t", "--type"); ok {
			if err != nil {
				return usageError(stderr, "inspect", err)
			}
			i += n
			continue
		}
		if strings.HasPrefix(args[i], "-") {
			return usageError(stderr, "inspect", fmt.Errorf("unknown flag: %s", args[i]))
		}
		refs, i = append(refs, args[i]), i+1
	}
	if len(refs) == 0 {
		fmt.Fprintln(stderr, "Error: no names or ids specified")
		return 125
	}
	var found []ctrInspect
	var missing []string
	for _, r := range refs {
		c, err := findContainer(store, r)
		if err != nil {
			if _, ierr := findImage(store, r); ierr == nil && format == "" && len(refs) == 1 {
				return podmanInspect(store, refs, stdout, stderr)
			}
			missing = append(missing, r)
			continue
		}
		found = append(found, c.inspect())
	}
	if format == "" {
		if found == nil {
			found = []ctrInspect{}
		}
		b, _ := json.MarshalIndent(found, "", "     ")
		fmt.Fprintf(stdout, "%s\n", b)
	} else {
		tmpl, err := template.New("inspect").Funcs(templateFuncs).Parse(format)
		if err != nil {
			fmt.Fprintf(stderr, "Error: template: %v\n", err)
			return 125
		}
		for _, in := range found {
			var b bytes.Buffer
			if err := tmpl.Execute(&b, in); err != nil {
				fmt.Fprintf(stderr, "Error: template: %v\n", err)
				return 125
			}
			fmt.Fprintln(stdout, b.String())
		}
	}
	if len(missing) > 0 {
		fmt.Fprintf(stderr, "Error: no such object: %q\n", missing[0])
		return 125
	}
	return 0
}
