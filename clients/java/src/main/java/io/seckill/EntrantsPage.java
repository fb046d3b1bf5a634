package io.seckill;

import java.util.List;

/**
 * One SECKILL.ENTRANTS page, entrants in arrival order. Pass {@link #cursor()} to the next
 * call; {@code "0"} ends the walk.
 */
public record EntrantsPage(String cursor, List<Entrant> entrants) {
    public EntrantsPage {
        entrants = List.copyOf(entrants);
    }

    /** The walk is over: the cursor is back to "0". */
    public boolean last() {
        return "0".equals(cursor);
    }
}
