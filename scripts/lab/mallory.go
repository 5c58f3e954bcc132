package lab

import (
	"context"
	"fmt"
	"os/exec"
	"os/user"
	"strconv"
	"strings"
	"testing"
	"time"
)

// MalloryName is the lab's unprivileged local user: another tenant of a
// shared node, who can write where every user can (/var/tmp, a shared
// scratch directory) and read every process's argv, and tries to make the
// window's root write through a link of theirs.
const MalloryName = "mallory"

// Mallory returns the uid and gid of the unprivileged user, creating it
// (no home, no login shell) the first time. The hosts share the machine's
// /etc/passwd, so one user serves every lab; a concurrent creation by
// another lab is not an error.
func Mallory(ctx context.Context) (uid, gid int, err error) {
	if u, err := user.Lookup(MalloryName); err == nil {
		return ids(u)
	}
	out, err := exec.CommandContext(ctx, "useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", MalloryName).CombinedOutput()
	u, lerr := user.Lookup(MalloryName)
	if lerr != nil {
		return 0, 0, fmt.Errorf("lab: create the user %s: %v: %s", MalloryName, err, strings.TrimSpace(string(out)))
	}
	return ids(u)
}

func ids(u *user.User) (int, int, error) {
	uid, err := strconv.Atoi(u.Uid)
	if err != nil {
		return 0, 0, fmt.Errorf("lab: user %s: uid %q: %w", u.Username, u.Uid, err)
	}
	gid, err := strconv.Atoi(u.Gid)
	if err != nil {
		return 0, 0, fmt.Errorf("lab: user %s: gid %q: %w", u.Username, u.Gid, err)
	}
	if uid == 0 {
		return 0, 0, fmt.Errorf("lab: user %s is root", u.Username)
	}
	return uid, gid, nil
}

// ExecAsMallory runs the shell command script on the host (as Exec does:
// the host's mount and network view) as the unprivileged user, without
// root's groups, and returns its combined output.
func (l *Lab) ExecAsMallory(ctx context.Context, host, script string) (string, error) {
	uid, gid, err := Mallory(ctx)
	if err != nil {
		return "", err
	}
	return l.Exec(ctx, host, "setpriv", "--reuid="+strconv.Itoa(uid), "--regid="+strconv.Itoa(gid), "--clear-groups",
		"--", "sh", "-c", script)
}

// RootFile puts a file of root's in host's /srv: what the unprivileged user
// tries to make the window overwrite through a link. It returns the path
// and a check, which fails t when the file is no longer what it was.
func (l *Lab) RootFile(t testing.TB, host string) (string, func()) {
	t.Helper()
	path := fmt.Sprintf("/srv/victim-%d", time.Now().UnixNano())
	const body = "a file of root\n"
	if out, err := l.Exec(context.Background(), host, "sh", "-c", "umask 022; printf '"+body+"' >"+path); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	return path, func() {
		t.Helper()
		if out, err := l.Exec(context.Background(), host, "cat", path); err != nil || out != body {
			t.Errorf("lab %s: %s was overwritten: now %.100q (%v)", l.hostLabel(host), path, out, err)
		}
	}
}
