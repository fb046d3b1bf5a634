package io.seckill;

/** SECKILL.RESERVE's statuses, in the order the server checks them (docs/commands.md). */
public enum ReserveStatus {
    NO_SALE, DRAW, FENCED, DUPLICATE, NOT_STARTED, ENDED, LIMIT, SOLD_OUT, RESERVED;

    /** The caller holds a reservation: a new one, or the one this REQID made before. */
    public boolean ok() {
        return this == RESERVED || this == DUPLICATE;
    }
}
