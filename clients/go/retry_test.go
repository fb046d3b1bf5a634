package seckill

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

var tryAgainReply = replyError("TRYAGAIN the sale's STREAM key is not on this node (slot migration in progress?); retry later")

// run drives retrying with a fake clock: each call costs callCost, each
// sleep advances the clock by its length.
func run(p TryAgainPolicy, callCost time.Duration, fails int) (int, []time.Duration, error) {
	clock := &fakeClock{t: time.Unix(0, 0)}
	var waits []time.Duration
	calls := 0
	_, attempts, err := retrying(context.Background(), p.withDefaults(), clock.now,
		func(_ context.Context, d time.Duration) error { waits = append(waits, d); clock.add(d); return nil },
		isTryAgain, func() (interface{}, error) {
			calls++
			clock.add(callCost)
			if calls <= fails {
				return nil, wrapError(tryAgainReply)
			}
			return "OK", nil
		})
	if attempts != calls {
		panic("attempts and calls differ")
	}
	return calls, waits, err
}

func TestTryAgainRetriedThenSucceeds(t *testing.T) {
	calls, waits, err := run(TryAgainPolicy{}, 0, 3)
	if err != nil || calls != 4 || len(waits) != 3 {
		t.Fatalf("%d calls, waits %v, %v", calls, waits, err)
	}
	for i, w := range waits {
		base := 10 * time.Millisecond << i
		if w < base/2 || w > base {
			t.Fatalf("wait %d is %v, want %v..%v", i, w, base/2, base)
		}
	}
}

func TestTryAgainBudgetCountsGoRedisTries(t *testing.T) {
	// Each call takes 116 ms: go-redis's own three retries inside it.
	calls, waits, err := run(TryAgainPolicy{}, 116*time.Millisecond, 1000)
	if !errors.Is(err, ErrTryAgain) {
		t.Fatalf("want the last TRYAGAIN, got %v", err)
	}
	var spent time.Duration
	for _, w := range waits {
		spent += w
		if w > 500*time.Millisecond {
			t.Fatalf("a wait of %v", w)
		}
	}
	spent += time.Duration(calls) * 116 * time.Millisecond
	if calls < 3 || spent > time.Second+116*time.Millisecond {
		t.Fatalf("%d calls, %v spent: the budget is 1 s plus one call", calls, spent)
	}
	t.Logf("%d calls in %v of simulated time", calls, spent)
}

func TestTryAgainNegativeBudgetLeavesItToGoRedis(t *testing.T) {
	if calls, _, err := run(TryAgainPolicy{Budget: -1}, 0, 5); calls != 1 || !errors.Is(err, ErrTryAgain) {
		t.Fatalf("%d calls, %v", calls, err)
	}
}

func TestOtherErrorsNotRetried(t *testing.T) {
	for _, e := range []error{replyError("ERR QTY is above the sale's LIMIT"), replyError("CLUSTERDOWN the cluster is down"),
		fmt.Errorf("dial tcp: connection refused"), context.Canceled} {
		calls := 0
		_, _, err := retrying(context.Background(), TryAgainPolicy{}.withDefaults(), time.Now, sleepCtx, isTryAgain,
			func() (interface{}, error) { calls++; return nil, wrapError(e) })
		if calls != 1 || err == nil {
			t.Fatalf("%v: %d calls", e, calls)
		}
	}
}

func TestRedirectionsHandedBackAreRetried(t *testing.T) {
	for _, e := range []error{replyError("MOVED 3999 127.0.0.1:6381"), replyError("ASK 3999 127.0.0.1:6381")} {
		calls := 0
		v, _, err := retrying(context.Background(), TryAgainPolicy{}.withDefaults(), time.Now, sleepCtx, isTryAgain,
			func() (interface{}, error) {
				if calls++; calls == 1 {
					return nil, wrapError(e)
				}
				return "OK", nil
			})
		if calls != 2 || err != nil || v != "OK" {
			t.Fatalf("%v: %d calls, %v", e, calls, err)
		}
	}
}

func TestTryAgainStopsWithTheContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	calls := 0
	_, _, err := retrying(ctx, TryAgainPolicy{}.withDefaults(), time.Now, sleepCtx, isTryAgain,
		func() (interface{}, error) { calls++; return nil, wrapError(tryAgainReply) })
	if calls != 1 || !errors.Is(err, ErrTryAgain) {
		t.Fatalf("%d calls, %v", calls, err)
	}
}

func TestWrapError(t *testing.T) {
	if wrapError(nil) != nil {
		t.Fatal("nil wrapped")
	}
	for _, plain := range []error{redis.Nil, context.DeadlineExceeded, fmt.Errorf("i/o timeout")} {
		if got := wrapError(plain); got != plain {
			t.Fatalf("%v became %v", plain, got)
		}
	}
	err := wrapError(replyError("FENCED the sale is fenced since a failover or restart: reconcile it with the order ledger, then SECKILL.UNFENCE"))
	var ce *CommandError
	if !errors.As(err, &ce) || ce.Code != "FENCED" || !errors.Is(err, ErrFenced) || errors.Is(err, ErrArgument) {
		t.Fatalf("%#v", err)
	}
	if !errors.Is(wrapError(tryAgainReply), ErrTryAgain) {
		t.Fatal("TRYAGAIN not matched")
	}
	// a CommandError with a message is no family: it matches only itself
	if errors.Is(err, &CommandError{Code: "FENCED", Message: "x"}) {
		t.Fatal("matched a non-family value")
	}
}
