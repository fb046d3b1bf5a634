package io.seckill;

import java.util.Collections;
import java.util.List;
import java.util.Map;

/**
 * The report of SECKILL.INFO and SECKILL.RECONCILE (docs/commands.md), decoded from its
 * JSON form or its RESP form into the same values.
 *
 * <p>The fields every sale has are components; {@link #fields()} holds every field the
 * server sent, in its order, as Java values ({@code Long}, {@code String}, {@code List},
 * null): a split sale's {@code round}, {@code sent}, {@code received}, {@code peers}, a draw
 * sale's fields, RECONCILE's {@code orders_*} classes.
 *
 * @param fence {@code "clear"} or {@code "fenced"} for a sale created with FENCE; null otherwise
 */
public record Report(long total, long remaining, long pending, long confirmed, long released,
                     long expired, long buyers, long reservations, List<Long> shards,
                     String invariant, String fence, Map<String, Object> fields) {

    /** RECONCILE's order classes. */
    public static final List<String> CLASSES = List.of("ok", "pending", "released", "unknown", "conflict");

    public Report {
        shards = List.copyOf(shards);
        fields = Collections.unmodifiableMap(fields);
    }

    /** {@code remaining + pending + confirmed} adds up (with a split sale's transfers). */
    public boolean invariantOk() {
        return "ok".equals(invariant);
    }

    /** The sale refuses to sell until it is reconciled and unfenced. */
    public boolean fenced() {
        return "fenced".equals(fence);
    }

    /** RECONCILE ... ORDERS: how many rows fell in {@code cls} (0 without ORDERS). */
    public long orders(String cls) {
        Object v = fields.get("orders_" + cls);
        return v instanceof Long n ? n : 0;
    }

    /** RECONCILE ... ORDERS: the ids of class {@code cls} (every class but ok). */
    @SuppressWarnings("unchecked")
    public List<String> orderIds(String cls) {
        Object v = fields.get("orders_" + cls + "_ids");
        return v instanceof List<?> l ? (List<String>) l : List.of();
    }
}
