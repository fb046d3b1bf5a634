package io.seckill;

/** SECKILL.UNFENCE's replies (a simple string). */
public enum UnfenceStatus {
    /** The sale was fenced; it now records the server's current replication id. */
    UNFENCED,
    /** The sale is not fenced, or was not created with FENCE: nothing changed. */
    NOT_FENCED,
    /** The key does not exist. */
    NO_SALE
}
