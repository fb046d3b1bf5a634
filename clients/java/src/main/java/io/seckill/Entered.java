package io.seckill;

/**
 * SECKILL.ENTER's reply: {@code [status, entrants]}.
 *
 * @param status   what the server decided
 * @param entrants how many entrants the sale has after the call
 */
public record Entered(EnterStatus status, long entrants) {
    /** The user is an entrant (new, or the retry of an entry). */
    public boolean ok() {
        return status.ok();
    }
}
