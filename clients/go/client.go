package seckill

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Options configure a Client; the zero value detects the backend, retries
// TRYAGAIN for up to a second and keeps no local sold-out flag.
type Options struct {
	// Backend: BackendAuto (detect once, at the first call), or the one to use.
	Backend Backend
	// TryAgain bounds the retries of a TRYAGAIN (see TryAgainPolicy).
	TryAgain TryAgainPolicy
	// LocalSoldOut keeps a per-sale flag that answers RESERVE SOLD_OUT
	// without a round trip after Redis said the sale had nothing left.
	LocalSoldOut bool
	// SoldOutLapse: how long the flag holds before Redis is asked again;
	// 0 or more than MaxSoldOutLapse (500 ms) means MaxSoldOutLapse.
	SoldOutLapse time.Duration
}

// Client sends the contract's commands through one go-redis client (a
// *redis.Client, *redis.ClusterClient, or a Sentinel failover client) to
// one backend. Safe for concurrent use; make one per go-redis client.
type Client struct {
	rdb     redis.UniversalClient
	opt     Options
	retry   TryAgainPolicy
	soldout *soldOut

	mu      sync.Mutex   // held by a detection, so it runs once
	backend atomic.Value // Backend, once known
	keys    sync.Map     // sale key -> []string: what seckill_keys listed (the library)
}

// New wraps rdb. Nothing is sent until the first call.
func New(rdb redis.UniversalClient, opt Options) *Client {
	c := &Client{rdb: rdb, opt: opt, retry: opt.TryAgain.withDefaults()}
	if opt.Backend != BackendAuto {
		c.backend.Store(opt.Backend)
	}
	if opt.LocalSoldOut {
		c.soldout = newSoldOut(opt.SoldOutLapse, time.Now)
	}
	return c
}

// Redis is the go-redis client underneath.
func (c *Client) Redis() redis.UniversalClient { return c.rdb }

// Backend is the backend this client uses, detected at the first call
// unless Options named one. A failed detection is tried again next time.
func (c *Client) Backend(ctx context.Context) (Backend, error) {
	return c.backendFor(ctx, "")
}

// backendFor is Backend, with the library's version asked with key (the
// sale key at hand; "" for ProbeKey).
func (c *Client) backendFor(ctx context.Context, key string) (Backend, error) {
	if b, ok := c.backend.Load().(Backend); ok {
		return b, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if b, ok := c.backend.Load().(Backend); ok {
		return b, nil // detected while this call waited
	}
	b, err := detect(ctx, c.rdb, key)
	if err != nil {
		return "", err
	}
	c.backend.Store(b)
	return b, nil
}

// Sale is the sale at key. Cheap: make one per call or keep it.
func (c *Client) Sale(key string) *Sale { return &Sale{c: c, key: key} }

// do sends one SECKILL.* command (args[0] the command, args[1] the sale
// key) on the client's backend, retrying TRYAGAIN within the policy. A
// nil reply is (nil, nil); an error reply is a *CommandError.
func (c *Client) do(ctx context.Context, args []interface{}) (interface{}, error) {
	key, _ := args[1].(string)
	b, err := c.backendFor(ctx, key)
	if err != nil {
		return nil, err
	}
	if b == BackendFunctions {
		return c.doLibrary(ctx, key, args)
	}
	return c.send(ctx, args)
}

// doLibrary sends args to the library with the keys the call declares
// (docs/managed-redis.md, "Calling it"): for INIT those its arguments name
// (and with REPLACE those seckill_keys lists for the sale replaced, and a
// draw sale's four), for INFO and GET none, for the rest the list
// seckill_keys gave for the sale, kept per key, and for DRAW <key>:secret
// besides. A call refused as undeclared (the sale was replaced, with
// another stream say, since the list was asked: nothing changed) goes once
// more with the list asked again; a second refusal is returned.
func (c *Client) doLibrary(ctx context.Context, key string, args []interface{}) (interface{}, error) {
	for attempt := 0; ; attempt++ {
		keys, err := c.declared(ctx, key, args)
		if err != nil {
			return nil, err
		}
		v, err := c.send(ctx, toFunctions(args, keys))
		if command(args) == "INIT" || isUndeclared(err) {
			c.keys.Delete(key) // asked again at the sale's next call
		}
		if attempt > 0 || !isUndeclared(err) {
			return v, err
		}
	}
}

// declared: the keys, after the sale key, the call on key declares.
func (c *Client) declared(ctx context.Context, key string, args []interface{}) ([]string, error) {
	sub := command(args)
	switch {
	case saleKeyOnly[sub]:
		return nil, nil
	case sub == "INIT":
		own, replace := initKeys(args)
		if !replace {
			return own, nil
		}
		old, err := c.listed(ctx, key)
		return merged(own, old, replacedKeys(key, old)), err
	}
	keys, err := c.cached(ctx, key)
	if sub == "DRAW" {
		keys = merged(keys, drawKeys(key)[:1]) // <key>:secret, which the list leaves out
	}
	return keys, err
}

// cached: the list seckill_keys gave for key, asked on its first use.
func (c *Client) cached(ctx context.Context, key string) ([]string, error) {
	if keys, ok := c.keys.Load(key); ok {
		return keys.([]string), nil
	}
	keys, err := c.listed(ctx, key)
	if err == nil {
		c.keys.Store(key, keys)
	}
	return keys, err
}

// listed asks FCALL_RO seckill_keys 1 key.
func (c *Client) listed(ctx context.Context, key string) ([]string, error) {
	v, err := c.send(ctx, keysArgs(key))
	if err != nil {
		return nil, err
	}
	return parseKeys(v)
}

// send sends args as they are, retrying TRYAGAIN within the policy.
func (c *Client) send(ctx context.Context, args []interface{}) (interface{}, error) {
	v, _, err := retrying(ctx, c.retry, time.Now, sleepCtx, isTryAgain, func() (interface{}, error) {
		v, err := c.rdb.Do(ctx, args...).Result()
		if errors.Is(err, redis.Nil) {
			return nil, nil
		}
		return v, wrapError(err)
	})
	return v, err
}

// isTryAgain: an answer that says the command did not run and may run
// later: TRYAGAIN, and a MOVED or ASK go-redis hands back. go-redis counts
// TRYAGAIN retries and redirections against one MaxRedirects, so a
// migration that ends while it retries TRYAGAIN can leave the MOVED to the
// new node as its last error; go-redis has then noted the new node, and
// the next call goes there.
func isTryAgain(err error) bool {
	var ce *CommandError
	if !errors.As(err, &ce) {
		return false
	}
	return ce.Code == "TRYAGAIN" || ce.Code == "MOVED" || ce.Code == "ASK"
}
