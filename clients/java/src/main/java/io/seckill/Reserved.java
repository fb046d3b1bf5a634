package io.seckill;

/**
 * SECKILL.RESERVE's reply: {@code [status, id or nil, remaining]}.
 *
 * @param status    what the server decided
 * @param id        the reservation id: the new one (RESERVED), the one this REQID made
 *                  before (DUPLICATE), the user's latest live one (LIMIT); null otherwise
 * @param remaining the sale's remaining stock after the call
 */
public record Reserved(ReserveStatus status, String id, long remaining) {
    /** The caller holds the reservation {@link #id()}. */
    public boolean ok() {
        return status.ok();
    }
}
