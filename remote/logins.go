package remote

import (
	"context"
	"fmt"
	"sync"
)

// Logins are the coordinator's SSH connections to one login node, shared
// by every node reached through it (the srun transport): a window of a
// thousand nodes holds a few connections, not a thousand. sshd serves at
// most MaxSessions channels on one connection (10 by default), so each
// connection carries at most SessionsPerConn commands at once and more
// are dialled as the commands in flight need them. A connection that is
// lost is dropped; the next command dials afresh.
type Logins struct {
	cfg SSHConfig
	// SessionsPerConn is how many commands share one connection.
	SessionsPerConn int

	mu      sync.Mutex
	conns   []*loginConn
	dialing int
	// awaiting are the commands waiting for a place on a connection
	// being dialled.
	awaiting int
	changed  chan struct{} // closed and replaced whenever a slot may have freed
	refs     int
	dial     func(ctx context.Context, cfg SSHConfig) (*Client, error)
	// steppers gather the commands of each job's nodes into shared job
	// steps (srun_step.go), one per job and step options.
	steppers map[string]*stepper
}

type loginConn struct {
	c    *Client
	used int
}

// DefaultSessionsPerConn stays below OpenSSH's default MaxSessions (10),
// with room for the SFTP or agent channels a login node may count.
const DefaultSessionsPerConn = 8

// maxLoginDials bounds the connections dialled at once: sshd's
// MaxStartups (10:30:100 by default) refuses unauthenticated connections
// past ten at random.
const maxLoginDials = 4

// NewLogins shares connections to the login node cfg reaches.
func NewLogins(cfg SSHConfig) *Logins {
	return &Logins{cfg: cfg, SessionsPerConn: DefaultSessionsPerConn, changed: make(chan struct{}), dial: Dial}
}

// Name is the login node's name, as errors give it.
func (l *Logins) Name() string { return l.cfg.nodeName() }

// hold and release count the executors that use l: the last one's
// release closes every connection.
func (l *Logins) hold() {
	l.mu.Lock()
	l.refs++
	l.mu.Unlock()
}

func (l *Logins) release() {
	l.mu.Lock()
	l.refs--
	var closing []*loginConn
	if l.refs <= 0 {
		closing, l.conns = l.conns, nil
	}
	l.mu.Unlock()
	for _, c := range closing {
		c.c.Close()
	}
}

// session reserves one command's place on a live connection, dialling
// one when every connection is full; done gives the place back.
func (l *Logins) session(ctx context.Context) (c *Client, done func(), err error) {
	per := max(1, l.SessionsPerConn)
	for {
		l.mu.Lock()
		live := l.conns[:0]
		for _, lc := range l.conns {
			if !lc.c.Lost() {
				live = append(live, lc)
				continue
			}
			go lc.c.Close() // its hops and agent go with it
		}
		l.conns = live
		for _, lc := range l.conns {
			if lc.used < per {
				lc.used++
				l.mu.Unlock()
				return lc.c, l.freer(lc), nil
			}
		}
		// A connection being dialled brings places of its own: wait for one
		// of them rather than dial another.
		promised := l.dialing*per > l.awaiting
		if !promised && l.dialing < maxLoginDials {
			l.dialing++
			l.mu.Unlock()
			c, err := l.dial(ctx, l.cfg)
			l.mu.Lock()
			l.dialing--
			l.wake()
			if err != nil {
				l.mu.Unlock()
				return nil, nil, err
			}
			lc := &loginConn{c: c, used: 1}
			l.conns = append(l.conns, lc)
			l.mu.Unlock()
			return c, l.freer(lc), nil
		}
		wait := l.changed
		if promised {
			l.awaiting++
		}
		l.mu.Unlock()
		var err error
		select {
		case <-wait:
		case <-ctx.Done():
			err = fmt.Errorf("%s: wait for a session: %w", l.Name(), ctx.Err())
		}
		if promised {
			l.mu.Lock()
			l.awaiting--
			l.mu.Unlock()
		}
		if err != nil {
			return nil, nil, err
		}
	}
}

func (l *Logins) freer(lc *loginConn) func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			lc.used--
			l.wake()
			l.mu.Unlock()
		})
	}
}

// wake tells the waiters that a place may have freed; l.mu is held.
func (l *Logins) wake() {
	close(l.changed)
	l.changed = make(chan struct{})
}

// Conns is how many connections l holds now.
func (l *Logins) Conns() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.conns)
}
