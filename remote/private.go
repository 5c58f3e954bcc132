package remote

import (
	"bytes"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"path"
	"strings"
)

// PrivateDirScript defines the shell function gpuaccept_private (bash):
// `gpuaccept_private DIR [parents]` makes DIR the caller's own directory
// (0700) or refuses it, with the reason on stderr, when it is a link,
// another user's, writable by others, or below a directory someone else
// could rename it out of. The node scripts source it; PrivateDirCmd runs
// it alone.
//
//go:embed private.sh
var PrivateDirScript string

// PrivateDirCmd is a command that runs gpuaccept_private on dir (see
// PrivateDirScript), making the missing directories above it too when
// parents is set. It exits 97 when it refuses.
func PrivateDirCmd(dir string, parents bool) string {
	p := ""
	if parents {
		p = " parents"
	}
	return "bash -c " + Quote(privateDirFunc+`gpuaccept_private "$1"`+p+` || exit 97`) + " private " + Quote(dir)
}

// privateDirFunc is the function without its comments, for command lines.
var privateDirFunc = stripComments(PrivateDirScript)

// ErrNotPrivate is what a transfer returns when the directory it would
// write in is not the user's own (see PrivateDirScript).
var ErrNotPrivate = errors.New("not the window's own directory")

// privateDir makes dir on the node (where target is to land) the user's own (PrivateDirCmd with
// parents) before a transfer writes in it: an upload's part file has a
// name anyone can guess, and must not land where another user could
// have planted a link by that name.
func (c *Client) privateDir(ctx context.Context, dir, target string) error {
	return makePrivate(ctx, c, c.cfg.Name, dir, target)
}

// makePrivate is privateDir for any executor: the SSH and the local
// transports check a directory the same way, by the same script.
func makePrivate(ctx context.Context, e Executor, name, dir, target string) error {
	dir = path.Clean(dir) // "" is the login directory, "."
	var out bytes.Buffer
	err := e.Run(ctx, Cmd{Command: PrivateDirCmd(dir, true), Stdout: &limitWriter{w: &out, n: 4096}})
	var ee *ExitError
	switch {
	case errors.As(err, &ee) && ee.Status == 97:
		why := strings.TrimPrefix(strings.TrimSpace(lastLines(strings.TrimSpace(ee.StderrTail), 1)), "gpuaccept: ")
		return fmt.Errorf("%s: upload %s: %w: %s", name, target, ErrNotPrivate, why)
	case err != nil:
		return fmt.Errorf("%s: upload %s: make the directory %s: %w", name, target, dir, err)
	}
	return nil
}
