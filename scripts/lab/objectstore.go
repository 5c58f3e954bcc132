package lab

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3afero"
	"github.com/spf13/afero"
	"golang.org/x/sys/unix"
)

// DefaultObjectStorePort is the port of the lab's object store on the storage host.
const DefaultObjectStorePort = 9000

// The keys the lab's object store is used with: ObjectStore writes them to every host's ~/.aws as the
// default profile, where the aws CLI on a node finds them as it would on a cluster. The server takes any
// key (gofakes3 checks no signature), but the CLI signs nothing without one.
const (
	ObjectStoreKeyID  = "gpuaccept-lab"
	ObjectStoreSecret = "gpuaccept-lab-secret"
	ObjectStoreRegion = "us-east-1"
)

// ObjectStore is an S3-compatible object store served from the lab's storage host, for staging s3://
// sources with the real aws CLI on the hosts. Objects live on disk under the lab's directory.
type ObjectStore struct {
	URL     string // the endpoint, "http://SUBNET.2:9000", for the hosts and the coordinator
	backend *s3afero.MultiBucketBackend
	srv     *http.Server
	done    chan error
}

// ObjectStore starts an S3-compatible object store on the storage host (its network namespace; Storage
// starts that host when it is not up yet, serving an empty directory over HTTP) and writes the keys to
// every host's ~/.aws. The server runs in this process on a socket opened inside the storage host's
// namespace: reached at SUBNET.2 like the HTTP server, cut and capped with the storage host, but not
// killed with it (Kill ends the namespace's processes; Close ends this). Close it before the lab goes down.
func (l *Lab) ObjectStore(ctx context.Context) (*ObjectStore, error) {
	ns, subnet, err := l.storageHost(ctx)
	if err != nil {
		return nil, fmt.Errorf("lab %s: object store: %w", l.Name, err)
	}
	root := filepath.Join(l.Dir, "objects")
	if err := os.RemoveAll(root); err != nil {
		return nil, fmt.Errorf("lab %s: object store: %w", l.Name, err)
	}
	if err := os.MkdirAll(root, 0o700); err != nil {
		return nil, fmt.Errorf("lab %s: object store: %w", l.Name, err)
	}
	backend, err := s3afero.MultiBucket(afero.NewBasePathFs(afero.NewOsFs(), root))
	if err != nil {
		return nil, fmt.Errorf("lab %s: object store: %w", l.Name, err)
	}
	if err := writeAWSConfig(filepath.Join(l.Dir, "home", ".aws")); err != nil {
		return nil, fmt.Errorf("lab %s: object store: %w", l.Name, err)
	}
	ln, err := listenIn(ns, "tcp", "0.0.0.0:"+strconv.Itoa(DefaultObjectStorePort))
	if err != nil {
		return nil, fmt.Errorf("lab %s: object store: listening on the storage host: %w", l.Name, err)
	}
	o := &ObjectStore{
		URL:     "http://" + subnet + ".2:" + strconv.Itoa(DefaultObjectStorePort),
		backend: backend,
		srv: &http.Server{
			Handler:           gofakes3.New(backend, gofakes3.WithAutoBucket(false)).Server(),
			ReadHeaderTimeout: 10 * time.Second,
		},
		done: make(chan error, 1),
	}
	go func() { o.done <- o.srv.Serve(ln) }()
	return o, nil
}

// storageHost starts the storage host when it is not up (Storage of an empty directory) and returns its
// network namespace's path and the lab's subnet.
func (l *Lab) storageHost(ctx context.Context) (ns, subnet string, err error) {
	ns = "/run/netns/" + l.Name + "-st"
	if _, err := os.Stat(ns); err != nil {
		empty := filepath.Join(l.Dir, "storage-empty")
		if err := os.MkdirAll(empty, 0o755); err != nil {
			return "", "", err
		}
		if _, err := l.Storage(ctx, empty); err != nil {
			return "", "", fmt.Errorf("starting the storage host: %w", err)
		}
	}
	env, err := l.Env()
	if err != nil {
		return "", "", err
	}
	if subnet = env["LAB_SUBNET"]; subnet == "" {
		return "", "", fmt.Errorf("no LAB_SUBNET in %s", filepath.Join(l.Dir, "env"))
	}
	return ns, subnet, nil
}

// Put stores size bytes from r as bucket/key (the bucket is made when missing), through the same backend
// the server reads.
func (o *ObjectStore) Put(bucket, key string, r io.Reader, size int64) error {
	ok, err := o.backend.BucketExists(bucket)
	if err != nil {
		return fmt.Errorf("object store: bucket %s: %w", bucket, err)
	}
	if !ok {
		if err := o.backend.CreateBucket(bucket); err != nil {
			return fmt.Errorf("object store: bucket %s: %w", bucket, err)
		}
	}
	if _, err := o.backend.PutObject(bucket, key, map[string]string{}, r, size, nil); err != nil {
		return fmt.Errorf("object store: s3://%s/%s: %w", bucket, key, err)
	}
	return nil
}

// PutFile is Put with a file's content.
func (o *ObjectStore) PutFile(bucket, key, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("object store: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("object store: %w", err)
	}
	return o.Put(bucket, key, f, st.Size())
}

// Close stops the server and waits for it.
func (o *ObjectStore) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := o.srv.Shutdown(ctx)
	if serr := <-o.done; !errors.Is(serr, http.ErrServerClosed) {
		err = errors.Join(err, serr)
	}
	return err
}

// listenIn opens a listening socket inside the network namespace at nsPath: the socket keeps the namespace it
// was made in. The thread that made it goes back to its own namespace before it is unlocked; where that fails
// it stays locked, and the runtime ends it with the goroutine. (The main thread cannot end, and the lab finds
// a process by its main thread's namespace: a process left in the storage host's would die with it.)
func listenIn(nsPath, network, addr string) (net.Listener, error) {
	type result struct {
		ln  net.Listener
		err error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		home, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			runtime.UnlockOSThread()
			ch <- result{err: err}
			return
		}
		defer home.Close()
		target, err := os.Open(nsPath)
		if err != nil {
			runtime.UnlockOSThread()
			ch <- result{err: err}
			return
		}
		defer target.Close()
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			ch <- result{err: fmt.Errorf("setns %s: %w", nsPath, err)}
			return
		}
		ln, err := net.Listen(network, addr)
		if unix.Setns(int(home.Fd()), unix.CLONE_NEWNET) == nil {
			runtime.UnlockOSThread()
		}
		ch <- result{ln, err}
	}()
	r := <-ch
	return r.ln, r.err
}

// writeAWSConfig gives the hosts' shared home the lab's keys and region as the default profile.
func writeAWSConfig(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	creds := fmt.Sprintf("[default]\naws_access_key_id = %s\naws_secret_access_key = %s\n", ObjectStoreKeyID, ObjectStoreSecret)
	if err := os.WriteFile(filepath.Join(dir, "credentials"), []byte(creds), 0o600); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "config"), []byte("[default]\nregion = "+ObjectStoreRegion+"\n"), 0o600)
}
