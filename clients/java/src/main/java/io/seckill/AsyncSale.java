package io.seckill;

import java.util.Iterator;
import java.util.List;
import java.util.concurrent.CompletableFuture;

/**
 * {@link Sale} with futures (Lettuce's async API underneath; other transports run the call
 * in the caller). The same rules: TRYAGAIN retried on a timer, never by blocking a thread;
 * errors complete the future with {@link CommandException} and the others.
 */
public final class AsyncSale {
    private final SeckillClient client;
    private final String key;

    AsyncSale(SeckillClient client, String key) {
        this.client = client;
        this.key = key;
    }

    public String key() {
        return key;
    }

    public CompletableFuture<Boolean> init(long total, InitOptions options) {
        return client.runAsync(key, Op.init(total, options));
    }

    public CompletableFuture<Reserved> reserve(String user, long qty, String reqid) {
        Op<Reserved> op = Op.reserve(user, qty, reqid);
        SoldOutFlags flags = client.soldOutFlags();
        if (flags == null) {
            return client.runAsync(key, op);
        }
        if (flags.answersLocally(key, reqid)) {
            return CompletableFuture.completedFuture(new Reserved(ReserveStatus.SOLD_OUT, null, 0));
        }
        long token = flags.token();
        return client.runAsync(key, op).whenComplete((r, err) -> {
            if (err == null) {
                flags.answered(reqid);
                flags.observe(key, token, r);
            } else if (!(SeckillClient.unwrap(err) instanceof CommandException)) {
                flags.unanswered(reqid);
            }
        });
    }

    public CompletableFuture<Settled> release(String rid) {
        return settled(Op.release(rid));
    }

    public CompletableFuture<Settled> confirm(String rid) {
        return settled(Op.confirm(rid));
    }

    private CompletableFuture<Settled> settled(Op<Settled> op) {
        SoldOutFlags flags = client.soldOutFlags();
        long token = flags == null ? 0 : flags.token();
        return client.runAsync(key, op).whenComplete((s, err) -> {
            if (flags != null && err == null) {
                flags.observe(key, token, false, s.remaining() > 0);
            }
        });
    }

    public CompletableFuture<Report> info() {
        SoldOutFlags flags = client.soldOutFlags();
        long token = flags == null ? 0 : flags.token();
        return client.runAsync(key, Op.info()).whenComplete((r, err) -> {
            if (flags != null && err == null) {
                flags.observe(key, token, r);
            }
        });
    }

    public CompletableFuture<Reservation> get(String rid) {
        return client.runAsync(key, Op.get(rid));
    }

    /** {@link Sale#enter(String, long, String)}. */
    public CompletableFuture<Entered> enter(String user, long qty, String reqid) {
        return client.runAsync(key, Op.enter(user, qty, reqid));
    }

    /** {@link Sale#draw(int)}. */
    public CompletableFuture<Drawn> draw(int count) {
        return draw(count, null);
    }

    /** {@link Sale#draw(int, String)}: with the beacon's value (null: no BEACON). */
    public CompletableFuture<Drawn> draw(int count, String beaconValue) {
        return client.runAsync(key, Op.draw(count, beaconValue));
    }

    /** {@link Sale#entrants(String, int)}. */
    public CompletableFuture<EntrantsPage> entrants(String cursor, int count) {
        return client.runAsync(key, Op.entrants(cursor, count));
    }

    public CompletableFuture<UnfenceStatus> unfence() {
        return client.runAsync(key, Op.unfence());
    }

    /** {@link Sale#reconcile}: the chunks one after another, each call after the last answered. */
    public CompletableFuture<ReconcileResult> reconcile(Iterable<Order> orders, boolean apply, boolean expire,
                                                        int chunkSize) {
        Iterator<List<Order>> chunks = Protocol.chunks(orders, chunkSize).iterator();
        Sale.Tally t = new Sale.Tally();
        CompletableFuture<Void> done = chunks.hasNext()
                ? next(chunks, t, apply, expire)
                : client.runAsync(key, Op.reconcile(List.of(), expire, false)).thenAccept(r -> t.add(r, key));
        return done.thenCompose(v -> apply && t.report.fenced()
                ? unfence().thenApply(t::result)
                : CompletableFuture.completedFuture(t.result(null)));
    }

    private CompletableFuture<Void> next(Iterator<List<Order>> chunks, Sale.Tally t, boolean apply, boolean expire) {
        List<Order> chunk = chunks.next();
        return client.runAsync(key, Op.reconcile(chunk, expire && t.calls == 0, apply)).thenCompose(r -> {
            t.add(r, key);
            return chunks.hasNext() ? next(chunks, t, apply, expire) : CompletableFuture.completedFuture(null);
        });
    }
}
