package fake_test

import (
	"bufio"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strings"
	"sync/atomic"
	"testing"

	"gpuaccept/remote"
	"gpuaccept/remote/contract"
	"gpuaccept/remote/fake"
)

// The fake keeps the contract as far as it claims to: it runs no shell, so
// it answers the suite's commands from handlers as a node's bash would.
func TestContractFake(t *testing.T) {
	f := fake.NewFleet("fake-1")
	h := f.Host("fake-1")
	lit := regexp.QuoteMeta
	h.Reply("^"+lit(contract.CmdStreams)+"$", fake.Reply{Stdout: "out\n", Stderr: "err\n"})
	h.Reply("^"+lit(contract.CmdFail)+"$", fake.Reply{Stderr: "about to fail\n", Exit: 3})
	h.Reply("^"+lit(contract.CmdKilled)+"$", fake.Reply{Signal: "KILL"})
	h.On("^"+lit(contract.CmdEnv)+"$", func(c *fake.Call) fake.Reply {
		v := func(k string) string {
			if s, ok := c.Env[k]; ok {
				return s
			}
			return "unset"
		}
		return fake.Reply{Stdout: v("A") + "|" + v("B_2")}
	})
	h.On("^"+lit(contract.CmdCat)+"$", func(c *fake.Call) fake.Reply { return fake.Reply{Stdout: string(c.Stdin)} })
	h.On("^"+lit(contract.CmdCount)+"$", func(c *fake.Call) fake.Reply { return fake.Reply{Stdout: fmt.Sprintln(len(c.Stdin))} })
	h.Reply("^"+lit(contract.CmdLongStderr)+"$", fake.Reply{Stderr: strings.Repeat("x", 1<<20) + "\nlast words\n", Exit: 1})
	h.Reply("^"+lit(contract.CmdBigStreams)+"$", fake.Reply{Stdout: strings.Repeat("a", 8<<20), Stderr: strings.Repeat("b", 8<<20)})
	h.On("^"+lit(contract.CmdIndex)+"$", func(c *fake.Call) fake.Reply { return fake.Reply{Stdout: c.Env["I"]} })
	h.Stream("^"+lit(contract.CmdStream)+"$", func(c *fake.Call) fake.Reply {
		io.WriteString(c.Stdout, "first\n")
		line, _ := bufio.NewReader(c.In).ReadString('\n')
		return fake.Reply{Stdout: "got " + line}
	})
	h.Reply(`sleep 600\.`, fake.Reply{Hang: true})
	var dirs atomic.Int32
	contract.Run(t, contract.Target{
		New: func(t *testing.T) remote.Executor {
			e, err := f.Dial(t.Context(), remote.Config{Name: "fake-1", SSH: &remote.SSHConfig{Host: "192.0.2.1"}})
			if err != nil {
				t.Fatal(err)
			}
			return e
		},
		Dir: func(*testing.T, remote.Executor) string { return fmt.Sprintf("/fake/dir-%d", dirs.Add(1)) },
		// The fake keeps no modes: 0 says so, and the suite does not judge them.
		File: func(_ *testing.T, _ remote.Executor, p string) (contract.File, bool) {
			file, ok := h.File(p)
			return contract.File{Size: file.Size, SHA256: file.SHA256}, ok
		},
		Entries: func(_ *testing.T, _ remote.Executor, dir string) []string {
			var out []string
			for p := range h.Files() {
				if rest, ok := strings.CutPrefix(p, dir+"/"); ok {
					out = append(out, rest)
				}
			}
			sort.Strings(out)
			return out
		},
		// Its commands are the handlers' calls: a command runs while Run has
		// not returned.
		Alive: func(*testing.T, string) bool { return h.Running() > 0 },
		// A dropped host ends the handler's context, as a guard ends a
		// command whose coordinator went away.
		Cut: func(*testing.T, remote.Executor) func() {
			h.Drop("cut by the contract suite")
			return func() {}
		},
		NotApplicable: map[string]string{
			"cancel-grace": "the fake runs no shell: a handler has no TERM trap to run",
			"home":         "the fake has no directories: its files are a map of the paths uploads name, relative or not",
		},
	})
}
