package io.seckill;

/** SECKILL.ENTER's statuses (a draw sale's registration; docs/draw-sales.md). */
public enum EnterStatus {
    NO_SALE, FENCED, ALREADY_ENTERED, DRAWN, NOT_STARTED, ENDED, ENTERED;

    /** The user is an entrant: a new one, or the retry of an entry. */
    public boolean ok() {
        return this == ENTERED || this == ALREADY_ENTERED;
    }
}
