package labtest

import (
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"gpuaccept/orchestrator/phases"
	"gpuaccept/scripts/lab"
)

// TestImageUploadRefusesWhatAnotherUserPlanted: another user of h1 reads
// the run ID from ps once the window starts (every command exports it),
// and makes the image phase's directory in /var/tmp theirs first, with a
// link to root's file where the upload's part file goes. The window as
// root refuses the directory, naming the node and the path; root's file
// is untouched.
func TestImageUploadRefusesWhatAnotherUserPlanted(t *testing.T) {
	l := needLab(t)
	img := labImage(t)
	id := strings.TrimPrefix(img.ID, "sha256:")
	prepare(t, l, nil)
	const host = "h1"
	victim := fmt.Sprintf("/srv/victim-%d", time.Now().UnixNano())
	const body = "a file of root\n"
	if out, err := l.Exec(t.Context(), host, "sh", "-c", "printf '"+body+"' >"+victim); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	part := "." + filepath.Base(img.DockerArchive) + ".gpuaccept-part"
	// Mallory: wait for a window command in ps, then plant.
	watch := `for i in $(seq 1200); do
  id=$(ps -eo args | grep -o 'GPUACCEPT_RUN=[^ ;]*labtest-[0-9a-f]*' | head -1 | sed "s/.*=//; s/'//g")
  [ -n "$id" ] && break; sleep 0.05
done
[ -n "$id" ] || { echo "no window seen"; exit 1; }
umask 0; mkdir "/var/tmp/gpuaccept-$id" && ln -s ` + victim + ` "/var/tmp/gpuaccept-$id/` + part + `" && echo "planted $id"`
	planted := make(chan string, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		out, err := l.ExecAsMallory(ctx, host, watch)
		if err != nil {
			out += err.Error()
		}
		planted <- out
	}()
	inv := writeInventory(t, l, []string{host}, "", "")
	// The image phase's directory is the default, in /var/tmp.
	appendInventory(t, inv, "image:\n  reference: \"localhost/gpuaccept-lab:1@sha256:"+id+"\"\n  runtime: podman\n  archive: "+
		img.DockerArchive+"\n  gpus: none\n  relay: direct\n")
	res, r := runWindow(t, inv)
	said := <-planted
	m := regexp.MustCompile(`planted (\S+)`).FindStringSubmatch(said)
	if m == nil {
		t.Fatalf("%s never planted: %s", lab.MalloryName, said)
	}
	dir := "/var/tmp/gpuaccept-" + m[1]
	t.Cleanup(func() { l.Exec(context.Background(), host, "rm", "-rf", dir) })
	if m[1] != r.ID {
		t.Fatalf("%s planted for run %s, the window was %s", lab.MalloryName, m[1], r.ID)
	}
	var im phases.Imaged
	phaseData(t, r, "image", -1, &im)
	ni := im.Nodes[host]
	want := host + ": upload " + dir + "/" + filepath.Base(img.DockerArchive) + ": not the window's own directory: refusing " + dir + ": it is owned by uid "
	if ni == nil || !strings.Contains(ni.Error, want) {
		t.Errorf("image on %s: %+v, want an error with %q\n%s", host, ni, want, res.stderr)
	}
	if out, err := l.Exec(t.Context(), host, "cat", victim); err != nil || out != body {
		t.Errorf("%s: %s was overwritten: now %.100q (%v)", host, victim, out, err)
	}
}
