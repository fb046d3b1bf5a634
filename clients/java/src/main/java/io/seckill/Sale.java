package io.seckill;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * One sale (one key) on a {@link SeckillClient}: the commands of docs/commands.md as
 * methods, replies as types, TRYAGAIN retried, server errors as {@link CommandException}.
 * Cheap to make; thread-safe.
 */
public final class Sale {
    private final SeckillClient client;
    private final String key;

    Sale(SeckillClient client, String key) {
        this.client = client;
        this.key = key;
    }

    public String key() {
        return key;
    }

    /** SECKILL.INIT: true when created (or replaced), false when the sale existed (nothing changed). */
    public boolean init(long total, InitOptions options) {
        return client.run(key, Op.init(total, options));
    }

    public Reserved reserve(String user) {
        return reserve(user, 1, null);
    }

    /**
     * SECKILL.RESERVE. Send a REQID (your order id): every retry of it, yours or after a
     * timeout, is then safe ({@code DUPLICATE} with the same id, no stock taken). With the
     * local sold-out flag on, a sale Redis showed empty within the lapse answers
     * {@code SOLD_OUT} here.
     */
    public Reserved reserve(String user, long qty, String reqid) {
        Op<Reserved> op = Op.reserve(user, qty, reqid);   // bad arguments refused before the flag answers
        SoldOutFlags flags = client.soldOutFlags();
        if (flags == null) {
            return client.run(key, op);
        }
        if (flags.answersLocally(key, reqid)) {
            return new Reserved(ReserveStatus.SOLD_OUT, null, 0);
        }
        long token = flags.token();
        Reserved r;
        try {
            r = client.run(key, op);
        } catch (CommandException e) {
            throw e;
        } catch (RuntimeException e) {
            flags.unanswered(reqid);
            throw e;
        }
        flags.answered(reqid);
        flags.observe(key, token, r);
        return r;
    }

    /** SECKILL.RELEASE: the units go back to the sale. */
    public Settled release(String rid) {
        return settled(Op.release(rid));
    }

    /** SECKILL.CONFIRM: the units are sold for good. */
    public Settled confirm(String rid) {
        return settled(Op.confirm(rid));
    }

    private Settled settled(Op<Settled> op) {
        SoldOutFlags flags = client.soldOutFlags();
        long token = flags == null ? 0 : flags.token();
        Settled s = client.run(key, op);
        if (flags != null) {
            flags.observe(key, token, false, s.remaining() > 0);
        }
        return s;
    }

    /** SECKILL.INFO (its FORMAT JSON form): the report, or null when the sale does not exist. */
    public Report info() {
        SoldOutFlags flags = client.soldOutFlags();
        long token = flags == null ? 0 : flags.token();
        Report r = client.run(key, Op.info());
        if (flags != null) {
            flags.observe(key, token, r);
        }
        return r;
    }

    /** SECKILL.GET: the reservation, or null when the sale or the id is unknown. */
    public Reservation get(String rid) {
        return client.run(key, Op.get(rid));
    }

    public Entered enter(String user) {
        return enter(user, 1, null);
    }

    /**
     * SECKILL.ENTER: register {@code user} for {@code qty} units in a draw sale
     * (docs/draw-sales.md). Send a REQID: a retry of it answers {@code ALREADY_ENTERED}.
     */
    public Entered enter(String user, long qty, String reqid) {
        return client.run(key, Op.enter(user, qty, reqid));
    }

    /** SECKILL.DRAW of at most {@code count} (1 to 1000) winners; call it until {@link Drawn#done()}. */
    public Drawn draw(int count) {
        return draw(count, null);
    }

    /**
     * SECKILL.DRAW ... BEACON value: the public value (1 to 1024 bytes) the sale's declared
     * beacon ({@link InitOptions#beacon}) took, given to the first DRAW (later calls may repeat
     * it or pass null, which sends no BEACON). The server refuses it for a sale that declared
     * no beacon.
     */
    public Drawn draw(int count, String beaconValue) {
        return client.run(key, Op.draw(count, beaconValue));
    }

    /**
     * SECKILL.ENTRANTS: one page of at most {@code count} (1 to 1000) entrants from
     * {@code cursor} ({@code "0"} first); the page's cursor {@code "0"} ends the walk.
     */
    public EntrantsPage entrants(String cursor, int count) {
        return client.run(key, Op.entrants(cursor, count));
    }

    /** SECKILL.UNFENCE: lift the fence after the ledger was re-applied. */
    public UnfenceStatus unfence() {
        return client.run(key, Op.unfence());
    }

    /**
     * SECKILL.RECONCILE over the order ledger, in chunks of at most {@code chunkSize} rows
     * (1 to 1000): EXPIRE with the first call only, APPLY with every one. An empty ledger is
     * one call for the report alone. After an APPLY that leaves a fenced sale, UNFENCE.
     *
     * @throws SaleMissingException when the sale does not exist
     */
    public ReconcileResult reconcile(Iterable<Order> orders, boolean apply, boolean expire, int chunkSize) {
        Tally t = new Tally();
        for (List<Order> chunk : Protocol.chunks(orders, chunkSize)) {
            t.add(client.run(key, Op.reconcile(chunk, expire && t.calls == 0, apply)), key);
        }
        if (t.calls == 0) {
            t.add(client.run(key, Op.reconcile(List.of(), expire, false)), key);
        }
        UnfenceStatus unfenced = apply && t.report.fenced() ? unfence() : null;
        return t.result(unfenced);
    }

    public ReconcileResult reconcile(Iterable<Order> orders, boolean apply) {
        return reconcile(orders, apply, false, Protocol.MAX_CHUNK);
    }

    /** Sums RECONCILE's chunks. */
    static final class Tally {
        final Map<String, Long> counts = new LinkedHashMap<>();
        final Map<String, List<String>> ids = new LinkedHashMap<>();
        Report report;
        int calls;

        Tally() {
            for (String c : Report.CLASSES) {
                counts.put(c, 0L);
                if (!c.equals("ok")) {
                    ids.put(c, new ArrayList<>());
                }
            }
        }

        void add(Report r, String key) {
            if (r == null) {
                throw new SaleMissingException(key);
            }
            calls++;
            for (String c : Report.CLASSES) {
                counts.merge(c, r.orders(c), Long::sum);
                if (!c.equals("ok")) {
                    ids.get(c).addAll(r.orderIds(c));
                }
            }
            report = r;
        }

        ReconcileResult result(UnfenceStatus unfenced) {
            Map<String, List<String>> frozen = new LinkedHashMap<>();
            ids.forEach((c, l) -> frozen.put(c, List.copyOf(l)));
            return new ReconcileResult(Map.copyOf(counts), frozen, report, calls, unfenced);
        }
    }
}
