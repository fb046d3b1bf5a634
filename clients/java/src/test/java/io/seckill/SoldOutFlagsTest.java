package io.seckill;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Test;

/** The local sold-out flag's rules on a clock the test moves (no Redis needed). */
class SoldOutFlagsTest {
    private final AtomicLong now = new AtomicLong(1_000_000_000L);
    private final SoldOutFlags flags = new SoldOutFlags(500, now::get);

    private void advanceMs(long ms) {
        now.addAndGet(ms * 1_000_000L);
    }

    @Test
    void soldOutFromRedisSetsItAndItLapsesAt500Ms() {
        assertFalse(flags.answersLocally("k", null));
        flags.observe("k", flags.token(), new Reserved(ReserveStatus.SOLD_OUT, null, 0));
        assertTrue(flags.answersLocally("k", null));
        assertFalse(flags.answersLocally("other", null), "per key");
        advanceMs(499);
        assertTrue(flags.answersLocally("k", null));
        advanceMs(1);
        assertFalse(flags.answersLocally("k", null), "lapsed: the next call asks Redis");
        assertEquals(2, flags.localAnswers());
    }

    @Test
    void theReservationThatTookTheLastUnitSetsIt() {
        flags.observe("k", flags.token(), new Reserved(ReserveStatus.RESERVED, "r1", 0));
        assertTrue(flags.answersLocally("k", null));
    }

    @Test
    void otherRepliesAtZeroDoNotSetIt() {
        flags.observe("k", flags.token(), new Reserved(ReserveStatus.NO_SALE, null, 0));
        flags.observe("k", flags.token(), new Reserved(ReserveStatus.NOT_STARTED, null, 0));
        flags.observe("k", flags.token(), new Reserved(ReserveStatus.LIMIT, "r1", 0));
        assertFalse(flags.answersLocally("k", null));
    }

    @Test
    void unitsLeftClearIt() {
        flags.observe("k", flags.token(), new Reserved(ReserveStatus.SOLD_OUT, null, 0));
        flags.observe("k", flags.token(), false, true);   // a RELEASE that gave stock back
        assertFalse(flags.answersLocally("k", null));
    }

    @Test
    void theLatestCallSentWinsWhateverOrderTheRepliesArriveIn() {
        long early = flags.token();   // e.g. a RESERVE sent before a RELEASE
        long late = flags.token();
        flags.observe("k", late, false, true);                                          // RELEASE: units left
        flags.observe("k", early, new Reserved(ReserveStatus.SOLD_OUT, null, 0));        // older reply, arrives last
        assertFalse(flags.answersLocally("k", null), "the older SOLD_OUT does not override the newer reply");

        long a = flags.token();
        long b = flags.token();
        flags.observe("k", b, new Reserved(ReserveStatus.SOLD_OUT, null, 0));
        flags.observe("k", a, false, true);
        assertTrue(flags.answersLocally("k", null), "the older units-left reply does not clear the newer SOLD_OUT");
    }

    @Test
    void aRetryOfAnUnansweredReqidBypassesTheFlag() {
        flags.observe("k", flags.token(), new Reserved(ReserveStatus.SOLD_OUT, null, 0));
        flags.unanswered("order-9");
        assertFalse(flags.answersLocally("k", "order-9"), "its first call may hold the last unit: ask Redis");
        assertTrue(flags.answersLocally("k", "order-10"));
        flags.answered("order-9");
        assertTrue(flags.answersLocally("k", "order-9"));
    }

    @Test
    void aReportReadsTheSameWay() {
        Report empty = Protocol.parseReportJson("{\"total\":5,\"remaining\":0,\"pending\":5,\"confirmed\":0,"
                + "\"shards\":[0],\"invariant\":\"ok\"}");
        flags.observe("k", flags.token(), empty);
        assertTrue(flags.answersLocally("k", null));
    }

    @Test
    void theLapseIsBoundedBy500Ms() {
        assertThrows(IllegalArgumentException.class, () -> new SoldOutFlags(501, now::get));
        assertThrows(IllegalArgumentException.class, () -> new SoldOutFlags(0, now::get));
    }
}
