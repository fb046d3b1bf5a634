package io.seckill.example;

import io.seckill.CommandException;
import io.seckill.InitOptions;
import io.seckill.Reserved;
import io.seckill.SeckillClient;
import io.seckill.Settled;
import io.seckill.SettleStatus;

/**
 * The checkout of a flash-sale service on the client: what used to be {@code jedis.evalsha}
 * of a Lua script over three hash-tagged keys is one call per step, retried safely by the
 * order id (REQID).
 */
public final class CheckoutService {
    /** What the web layer shows: the reservation to pay for, or why there is none. */
    public record Attempt(boolean reserved, String reservationId, long remaining, String reason) {}

    private final SeckillClient seckill;

    public CheckoutService(SeckillClient seckill) {
        this.seckill = seckill;
    }

    static String key(long saleId) {
        return "sale:{" + saleId + "}";   // the hash tag keeps the sale and its stream on one node
    }

    /** Opens a sale: {@code total} units, {@code perUser} each, unpaid holds released after {@code holdMs}. */
    public boolean openSale(long saleId, long total, long perUser, long holdMs) {
        return seckill.sale(key(saleId)).init(total, new InitOptions().limit(perUser).holdMs(holdMs)
                .stream(key(saleId) + ":events"));
    }

    /** The seeds' TryReserve: one unit for the user; a retry with the same order id is harmless. */
    public Attempt tryReserve(long saleId, String userId, String orderId) {
        try {
            Reserved r = seckill.sale(key(saleId)).reserve(userId, 1, orderId);
            return switch (r.status()) {
                case RESERVED, DUPLICATE -> new Attempt(true, r.id(), r.remaining(), null);
                case LIMIT -> new Attempt(false, r.id(), r.remaining(), "you already hold " + r.id());
                default -> new Attempt(false, null, r.remaining(), r.status().name());
            };
        } catch (CommandException e) {   // bad input or a server refusal: nothing changed
            return new Attempt(false, null, -1, e.getMessage());
        }
    }

    /** Payment went through. */
    public boolean paid(long saleId, String reservationId) {
        Settled s = seckill.sale(key(saleId)).confirm(reservationId);
        return s.status() == SettleStatus.CONFIRMED || s.status() == SettleStatus.ALREADY_CONFIRMED;
    }

    /** Payment failed or the user gave up: the unit goes back on sale. */
    public long cancelled(long saleId, String reservationId) {
        return seckill.sale(key(saleId)).release(reservationId).remaining();
    }
}
