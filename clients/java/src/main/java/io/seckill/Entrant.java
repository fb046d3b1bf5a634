package io.seckill;

/**
 * One entrant as SECKILL.ENTRANTS lists it.
 *
 * @param result {@link #ENTERED} (not drawn yet, or on the waitlist), {@link #DRAWN} (won in
 *               the draw) or {@link #PROMOTED} (won from the waitlist)
 */
public record Entrant(String user, long qty, String result) {
    public static final String ENTERED = "entered";
    public static final String DRAWN = "drawn";
    public static final String PROMOTED = "promoted";

    /** Drawn or promoted: the entrant holds a reservation. */
    public boolean won() {
        return DRAWN.equals(result) || PROMOTED.equals(result);
    }
}
