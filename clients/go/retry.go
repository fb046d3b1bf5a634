package seckill

import (
	"context"
	"math/rand/v2"
	"time"
)

// TryAgainPolicy bounds the retries of a call the server answered
// TRYAGAIN (a key of it mid-migration: nothing changed, so any command may
// be sent again, and a REQID makes a repeat DUPLICATE), or that go-redis
// handed back as MOVED or ASK after spending its redirections (the command
// did not run either).
//
// go-redis already retries TRYAGAIN inside each call (a Client up to
// MaxRetries, 3 by default; a ClusterClient up to MaxRedirects, 3, with its
// 8 to 512 ms backoff: about 0.1 s), so this loop does not multiply that:
// it only adds calls while Budget, counted from the first call and
// including go-redis's own tries, is not spent.
type TryAgainPolicy struct {
	Budget time.Duration // 0: 1 s; negative: no retries beyond go-redis's
	Base   time.Duration // the first wait, doubling: 0: 10 ms
	Max    time.Duration // the longest wait: 0: 500 ms
}

func (p TryAgainPolicy) withDefaults() TryAgainPolicy {
	if p.Budget == 0 {
		p.Budget = time.Second
	}
	if p.Base <= 0 {
		p.Base = 10 * time.Millisecond
	}
	if p.Max <= 0 {
		p.Max = 500 * time.Millisecond
	}
	return p
}

// jitter: half the backoff fixed, half random, so retries of many callers
// spread out.
func jitter(backoff time.Duration) time.Duration {
	half := backoff / 2
	return half + time.Duration(rand.Int64N(int64(half)+1))
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// retrying runs call until it returns anything but TRYAGAIN, or the next
// wait would go past the budget. isTryAgain, now and sleep are the
// seams the unit tests drive.
func retrying(ctx context.Context, p TryAgainPolicy, now func() time.Time,
	sleep func(context.Context, time.Duration) error, isTryAgain func(error) bool,
	call func() (interface{}, error)) (interface{}, int, error) {
	start := now()
	backoff := p.Base
	for attempt := 1; ; attempt++ {
		v, err := call()
		if err == nil || !isTryAgain(err) || p.Budget < 0 {
			return v, attempt, err
		}
		wait := jitter(backoff)
		if now().Sub(start)+wait > p.Budget {
			return v, attempt, err
		}
		if serr := sleep(ctx, wait); serr != nil {
			return v, attempt, err
		}
		backoff = min(2*backoff, p.Max)
	}
}
