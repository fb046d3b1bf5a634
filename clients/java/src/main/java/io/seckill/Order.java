package io.seckill;

/** One row of the order ledger, as RECONCILE ... ORDERS takes it. */
public record Order(String rid, String user, long qty) {
    public Order {
        Protocol.checkId(rid, "reservation id");
        Protocol.checkId(user, "user");
        if (qty < 1) {
            throw new IllegalArgumentException("order " + rid + ": qty must be at least 1");
        }
    }
}
