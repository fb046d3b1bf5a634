package io.seckill;

import java.util.random.RandomGenerator;

/**
 * How TRYAGAIN is retried (Jedis and Lettuce raise it at once): up to {@code attempts}
 * calls in all, the wait doubling from {@code baseMs} to at most {@code maxMs}, half of each
 * wait as jitter. The default, 8 calls from 10 ms to 500 ms, waits at most about 1.1 s in
 * all, then the TRYAGAIN goes to the caller. A retry is safe: the refused call changed
 * nothing, and a REQID makes any repeat DUPLICATE.
 */
public record RetryPolicy(int attempts, long baseMs, long maxMs) {
    public static final RetryPolicy DEFAULT = new RetryPolicy(8, 10, 500);
    /** TRYAGAIN goes to the caller at once. */
    public static final RetryPolicy NONE = new RetryPolicy(1, 0, 0);

    public RetryPolicy {
        if (attempts < 1 || attempts > 100 || baseMs < 0 || maxMs < baseMs) {
            throw new IllegalArgumentException("attempts 1..100, 0 <= baseMs <= maxMs");
        }
    }

    /** The wait after call number {@code attempt} (1-based) failed with TRYAGAIN. */
    public long delayMs(int attempt, RandomGenerator random) {
        long backoff = maxMs;
        if (attempt - 1 < 30) {
            backoff = Math.min(maxMs, baseMs << (attempt - 1));
        }
        return backoff / 2 + random.nextLong(backoff / 2 + 1);
    }

    /** The longest all the waits together can take. */
    public long maxTotalWaitMs() {
        long total = 0;
        for (int a = 1; a < attempts; a++) {
            total += a - 1 < 30 ? Math.min(maxMs, baseMs << (a - 1)) : maxMs;
        }
        return total;
    }
}
