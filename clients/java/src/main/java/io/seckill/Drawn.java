package io.seckill;

/**
 * SECKILL.DRAW's reply: {@code [drawn, remaining, left_to_draw]}. Call DRAW again until
 * {@link #done()}.
 *
 * @param drawn      winners this call drew
 * @param remaining  the sale's stock left after the call
 * @param leftToDraw what the draw may still give out (0: the draw is complete)
 */
public record Drawn(long drawn, long remaining, long leftToDraw) {
    /** The draw is complete: nothing is left to draw. */
    public boolean done() {
        return leftToDraw == 0;
    }
}
