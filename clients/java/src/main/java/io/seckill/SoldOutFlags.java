package io.seckill;

import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.LongAdder;
import java.util.function.LongSupplier;

/**
 * The local sold-out flag (docs/clients.md, Java): once Redis has shown a sale at 0 units,
 * RESERVE answers SOLD_OUT here, with no round trip, for at most {@code lapseMs}; then the
 * next call asks Redis again.
 *
 * <ul>
 * <li>Only Redis sets it: a RESERVE that answered SOLD_OUT, the RESERVED that took the last
 *     unit, an INFO that read remaining 0. No pub/sub message sets or clears it, so a lost or
 *     forged message can neither stop a sale nor keep it going.
 * <li>Any reply that shows units left clears it (RESERVE, RELEASE, CONFIRM, INFO).
 * <li>A reply changes the flag only when no call sent after it has changed it already: the
 *     latest call sent wins, whatever order the replies arrive in.
 * <li>A REQID whose RESERVE got no reply (a timeout, a lost connection) bypasses the flag on
 *     its retry: the first call may have taken the last unit, and its retry must reach Redis
 *     to learn that (DUPLICATE with the id).
 * </ul>
 */
public final class SoldOutFlags {
    /** The longest a flag lasts by default. */
    public static final long DEFAULT_LAPSE_MS = 500;
    private static final int RETRY_MEMORY = 10_000;

    private final long lapseNanos;
    private final LongSupplier clock;
    private final AtomicLong sequence = new AtomicLong();
    private final Map<String, Flag> flags = new ConcurrentHashMap<>();
    private final Map<String, Boolean> retrying = Collections.synchronizedMap(new LinkedHashMap<>(16, 0.75f, true) {
        private static final long serialVersionUID = 1L;

        @Override
        protected boolean removeEldestEntry(Map.Entry<String, Boolean> eldest) {
            return size() > RETRY_MEMORY;
        }
    });
    private final LongAdder localAnswers = new LongAdder();

    /** When the flag was set (nanoTime) or null, and the sequence number that last changed it. */
    private record Flag(Long setAt, long by) {}

    public SoldOutFlags(long lapseMs, LongSupplier nanoClock) {
        if (lapseMs < 1 || lapseMs > DEFAULT_LAPSE_MS) {
            throw new IllegalArgumentException("lapseMs must be from 1 to " + DEFAULT_LAPSE_MS);
        }
        this.lapseNanos = lapseMs * 1_000_000L;
        this.clock = nanoClock;
    }

    public SoldOutFlags() {
        this(DEFAULT_LAPSE_MS, System::nanoTime);
    }

    /** Taken before a call is sent; hand it to {@link #observe} with the reply. */
    public long token() {
        return sequence.incrementAndGet();
    }

    /** Whether RESERVE of {@code key} answers SOLD_OUT locally now (counted when it does). */
    public boolean answersLocally(String key, String reqid) {
        Flag f = flags.get(key);
        if (f == null || f.setAt() == null || clock.getAsLong() - f.setAt() >= lapseNanos) {
            return false;
        }
        if (reqid != null && retrying.containsKey(reqid)) {
            return false;
        }
        localAnswers.increment();
        return true;
    }

    /**
     * A reply from Redis about {@code key}: {@code empty} when it shows the sale at 0 units
     * to sell, else it shows units left (remaining above 0) or says nothing (neither).
     */
    public void observe(String key, long token, boolean empty, boolean unitsLeft) {
        if (!empty && !unitsLeft) {
            return;
        }
        Long setAt = empty ? clock.getAsLong() : null;
        flags.compute(key, (k, f) -> f != null && f.by() > token ? f : new Flag(setAt, token));
    }

    /** RESERVE's reply: SOLD_OUT, or the RESERVED that took the last unit, sets the flag. */
    void observe(String key, long token, Reserved r) {
        boolean empty = r.status() == ReserveStatus.SOLD_OUT
                || (r.status() == ReserveStatus.RESERVED && r.remaining() == 0);
        observe(key, token, empty, r.remaining() > 0);
    }

    /** A report (INFO, RECONCILE): remaining 0 sets the flag, units left clear it. */
    void observe(String key, long token, Report r) {
        if (r != null) {
            observe(key, token, r.remaining() == 0, r.remaining() > 0);
        }
    }

    /** RESERVE with this REQID got no reply: its retry must reach Redis. */
    public void unanswered(String reqid) {
        if (reqid != null) {
            retrying.put(reqid, Boolean.TRUE);
        }
    }

    /** RESERVE with this REQID got its reply. */
    public void answered(String reqid) {
        if (reqid != null) {
            retrying.remove(reqid);
        }
    }

    /** How many RESERVEs the flag answered locally. */
    public long localAnswers() {
        return localAnswers.sum();
    }
}
