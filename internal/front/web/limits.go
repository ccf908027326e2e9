package web

import (
	"net"
	"net/http"
	"net/netip"
	"sync"
	"time"
)

// What one client may cost the dashboard. A client is an address as the
// server sees it (clientOf): behind a proxy every reader is the proxy's
// address, so a proxied dashboard raises Config.StreamsPerClient.
const (
	// guessBurst wrong tokens a client may send at once; then one more per
	// guessEvery.
	guessBurst = 10
	guessEvery = 6 * time.Second
	// maxClients bounds the clients remembered by a bucket table; past it,
	// new clients share one bucket (see buckets.take).
	maxClients = 4096
)

// clientOf is the client r counts against: its remote host, an IPv6
// address by its /64 (one machine holds a whole /64).
func clientOf(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return host
	}
	a = a.Unmap()
	if a.Is6() {
		p, _ := a.Prefix(64)
		return p.String()
	}
	return a.String()
}

// bucket is a token bucket: tokens of at most burst, one back per every.
type bucket struct {
	tokens float64
	at     time.Time
}

// buckets are the token buckets of clients, of burst tokens refilled at one
// per every. A client's bucket is forgotten once full again.
type buckets struct {
	burst float64
	every time.Duration
	mu    sync.Mutex
	m     map[string]*bucket
	now   func() time.Time // time.Now; tests set it
}

func newBuckets(burst int, every time.Duration) *buckets {
	return &buckets{burst: float64(burst), every: every, m: map[string]*bucket{}, now: time.Now}
}

// refill brings b up to date at now and reports whether it is full.
func (bs *buckets) refill(b *bucket, now time.Time) bool {
	b.tokens += float64(now.Sub(b.at)) / float64(bs.every)
	b.at = now
	if b.tokens >= bs.burst {
		b.tokens = bs.burst
		return true
	}
	return false
}

// get returns client's bucket, made full when new. With maxClients
// remembered, full buckets are forgotten first; if none is, new clients
// share the overflow bucket, so an attacker with many addresses exhausts
// only that one.
func (bs *buckets) get(client string, now time.Time) *bucket {
	if b, ok := bs.m[client]; ok {
		return b
	}
	if len(bs.m) >= maxClients {
		for k, b := range bs.m {
			if bs.refill(b, now) {
				delete(bs.m, k)
			}
		}
		if len(bs.m) >= maxClients {
			client = "overflow"
			if b, ok := bs.m[client]; ok {
				return b
			}
		}
	}
	b := &bucket{tokens: bs.burst, at: now}
	bs.m[client] = b
	return b
}

// wait is how long client must wait for a token: zero when it has one.
func (bs *buckets) wait(client string) time.Duration {
	bs.mu.Lock()
	defer bs.mu.Unlock()
	now := bs.now()
	b := bs.get(client, now)
	bs.refill(b, now)
	if b.tokens >= 1 {
		return 0
	}
	return time.Duration((1 - b.tokens) * float64(bs.every))
}

// miss takes a token of client's.
func (bs *buckets) miss(client string) {
	bs.mu.Lock()
	defer bs.mu.Unlock()
	now := bs.now()
	b := bs.get(client, now)
	bs.refill(b, now)
	if b.tokens > 0 {
		b.tokens--
	}
	if b.tokens < 0 {
		b.tokens = 0
	}
}

// streamSlots counts the event streams open, in all and per client.
type streamSlots struct {
	perClient, total int
	mu               sync.Mutex
	n                int
	by               map[string]int
}

// take holds a slot for client: 0 and a release func, or the status that
// refuses the stream (429: this client has its share; 503: the server has).
func (ss *streamSlots) take(client string) (status int, release func()) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.by == nil {
		ss.by = map[string]int{}
	}
	switch {
	case ss.by[client] >= ss.perClient:
		return http.StatusTooManyRequests, nil
	case ss.n >= ss.total:
		return http.StatusServiceUnavailable, nil
	}
	ss.n++
	ss.by[client]++
	var once sync.Once
	return 0, func() {
		once.Do(func() {
			ss.mu.Lock()
			defer ss.mu.Unlock()
			ss.n--
			if ss.by[client]--; ss.by[client] <= 0 {
				delete(ss.by, client)
			}
		})
	}
}
