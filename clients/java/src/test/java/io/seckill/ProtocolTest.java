package io.seckill;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import java.util.stream.IntStream;
import org.junit.jupiter.api.Test;

/** Arguments, backends, chunking and the retry policy, without Redis. */
class ProtocolTest {
    @Test
    void bothBackendsSpellTheSameCommand() {
        Wire m = Backend.MODULE.wire("RESERVE", "sale:{1}", List.of("u1", "REQID", "o1"), Wire.Reply.ARRAY);
        assertEquals(List.of("SECKILL.RESERVE", "sale:{1}", "u1", "REQID", "o1"), m.words());
        assertEquals("sale:{1}", m.routingKey());
        Wire f = Backend.FUNCTIONS.wire("RESERVE", "sale:{1}", List.of("u1", "REQID", "o1"), Wire.Reply.ARRAY);
        assertEquals(List.of("FCALL", "seckill_reserve", "1", "sale:{1}", "u1", "REQID", "o1"), f.words());
        assertEquals("sale:{1}", f.routingKey(), "the declared key routes the FCALL");
        for (String read : List.of("INFO", "GET", "ENTRANTS")) {
            assertEquals("FCALL_RO", Backend.FUNCTIONS.wire(read, "k", List.of(), Wire.Reply.BULK).name());
        }
        assertEquals("FCALL", Backend.FUNCTIONS.wire("UNFENCE", "k", List.of(), Wire.Reply.STATUS).name());
    }

    @Test
    void theLibraryDeclaresTheKeysAfterTheSaleKey() {
        Wire f = Backend.FUNCTIONS.wire("RESERVE", "s", List.of("s:ev"), List.of("u1"), Wire.Reply.ARRAY);
        assertEquals(List.of("FCALL", "seckill_reserve", "2", "s", "s:ev", "u1"), f.words());
        assertEquals("s", f.routingKey());
        Wire m = Backend.MODULE.wire("RESERVE", "s", List.of("s:ev"), List.of("u1"), Wire.Reply.ARRAY);
        assertEquals(List.of("SECKILL.RESERVE", "s", "u1"), m.words(), "the module declares its keys itself");
        assertEquals(List.of("FCALL_RO", "seckill_keys", "1", "s"), LibraryKeys.keysWire("s").words());
        assertEquals(List.of("FCALL_RO", "seckill_version", "1", "seckill:probe"), LibraryKeys.versionWire(null).words());
        assertEquals("s", LibraryKeys.versionWire("s").routingKey());
        assertEquals(List.of("a", "b", "c"), LibraryKeys.merged(List.of("a", "b"), List.of("b", "c")));
        assertEquals(List.of(), LibraryKeys.replacedKeys("s", List.of("s:ev")));
        assertEquals(LibraryKeys.drawKeys("s"), LibraryKeys.replacedKeys("s", List.of("s:entrants", "s:perm", "s:wait")));
        assertEquals(List.of("s:entrants", "s:secret"), LibraryKeys.forCall("DRAW", "s", List.of("s:entrants")));
        assertEquals(List.of("s:entrants"), LibraryKeys.forCall("ENTER", "s", List.of("s:entrants")));
        assertEquals(List.of("s:ev", "s:secret"), LibraryKeys.parseKeys(List.of("s:ev", "s:secret")));
        assertEquals(List.of(), LibraryKeys.parseKeys(List.of()));
        assertThrows(ProtocolException.class, () -> LibraryKeys.parseKeys("OK"));
        assertTrue(LibraryKeys.undeclared(new CommandException("ERR undeclared key s:ev: pass the keys ...", null)));
        assertTrue(!LibraryKeys.undeclared(new CommandException("ERR QTY must be from 1", null)));
        assertTrue(!LibraryKeys.undeclared(null));
    }

    @Test
    void initKeysFromItsArguments() {
        List<String> draw4 = List.of("s:secret", "s:entrants", "s:perm", "s:wait");
        List<String> streamDraw = new ArrayList<>(List.of("s:ev"));
        streamDraw.addAll(draw4);
        Object[][] cases = {
            {List.of(), List.of(), false},
            {List.of("STREAM", "s:ev"), List.of("s:ev"), false},
            {List.of("stream", "s:ev", "maxlen", "10", "REPLACE"), List.of("s:ev"), true},
            {List.of("END", "5", "DRAW"), draw4, false},
            {List.of("END", "5", "draw", "BEACON", "nist", "Replace"), draw4, true},
            {List.of("STREAM", "s:ev", "END", "5", "DRAW"), streamDraw, false},
            // values that read like option words are values
            {List.of("STREAM", "draw", "MAXLEN", "5"), List.of("draw"), false},
            {List.of("END", "5", "DRAW", "BEACON", "REPLACE"), draw4, false},
            {List.of("SPLIT", "r1", "2", "DRAW", "REPLACE", "STREAM", "s:ev"), List.of("s:ev"), false},
            {List.of("LIMIT", "2", "HOLD", "1", "START", "1", "TTL", "9", "SHARDS", "2", "FENCE", "STREAM", "s:ev"),
                List.of("s:ev"), false},
            // an unknown word or a bad SPLIT count ends the reading: the server refuses the call
            {List.of("BOGUS", "DRAW"), List.of(), false},
            {List.of("SPLIT", "r1", "x", "DRAW"), List.of(), false},
            {List.of("STREAM"), List.of(), false},
        };
        for (Object[] c : cases) {
            List<String> args = new ArrayList<>(List.of("10"));
            for (Object o : (List<?>) c[0]) {
                args.add((String) o);
            }
            assertEquals(new LibraryKeys.InitKeys(castList(c[1]), (Boolean) c[2]),
                    LibraryKeys.initKeys("s", args), args.toString());
        }
        List<String> init = new ArrayList<>(List.of("10"));
        init.addAll(new InitOptions().endMs(5).stream("s:ev").maxlen(3).draw().fence().replace().args());
        assertEquals(new LibraryKeys.InitKeys(streamDraw, true), LibraryKeys.initKeys("s", init));
    }

    @SuppressWarnings("unchecked")
    private static List<String> castList(Object o) {
        return (List<String>) o;
    }

    @Test
    void reserveArgsAndIdBounds() {
        assertEquals(List.of("u1"), Protocol.reserveArgs("u1", 1, null));
        assertEquals(List.of("u1", "QTY", "3", "REQID", "o"), Protocol.reserveArgs("u1", 3, "o"));
        assertThrows(IllegalArgumentException.class, () -> Protocol.reserveArgs("", 1, null));
        assertThrows(IllegalArgumentException.class, () -> Protocol.reserveArgs("é".repeat(129), 1, null),
                "258 bytes in UTF-8");
        Protocol.reserveArgs("é".repeat(128), 1, null);   // 256 bytes: allowed
    }

    @Test
    void initOptionsInTheOrderGiven() {
        assertEquals(List.of("LIMIT", "2", "HOLD", "60000", "STREAM", "s", "MAXLEN", "10", "FENCE", "REPLACE"),
                new InitOptions().limit(2).holdMs(60_000).stream("s").maxlen(10).fence().replace().args());
        assertThrows(IllegalArgumentException.class, () -> new InitOptions().maxlen(3));
        assertThrows(IllegalArgumentException.class, () -> new InitOptions().draw().args());
        assertEquals(List.of("END", "5", "DRAW"), new InitOptions().endMs(5).draw().args());
    }

    @Test
    void drawAndEntrantsArgs() {
        assertEquals(List.of("u1", "QTY", "2", "REQID", "e1"), Protocol.enterArgs("u1", 2, "e1"));
        assertEquals(List.of("COUNT", "10"), Protocol.drawArgs(10, null));
        assertEquals(List.of("0", "COUNT", "1000"), Protocol.entrantsArgs("0", 1000));
        for (int bad : new int[] {0, 1001}) {
            assertThrows(IllegalArgumentException.class, () -> Protocol.drawArgs(bad, null));
            assertThrows(IllegalArgumentException.class, () -> Protocol.entrantsArgs("0", bad));
        }
        assertThrows(IllegalArgumentException.class, () -> Protocol.entrantsArgs("", 10));
    }

    /** BEACON's encoding only: the servers of this tree do not take it yet (draw v2). */
    @Test
    void beaconArgs() {
        assertEquals(List.of("COUNT", "100", "BEACON", "round 1234567: 8f3e"), Protocol.drawArgs(100, "round 1234567: 8f3e"));
        Protocol.drawArgs(1, "v".repeat(1024));
        assertThrows(IllegalArgumentException.class, () -> Protocol.drawArgs(1, "v".repeat(1025)));
        assertThrows(IllegalArgumentException.class, () -> Protocol.drawArgs(1, "é".repeat(513)), "1026 bytes in UTF-8");
        assertThrows(IllegalArgumentException.class, () -> Protocol.drawArgs(1, ""));

        assertEquals(List.of("END", "5", "DRAW", "BEACON", "drand quicknet round 1234567", "FENCE"),
                new InitOptions().endMs(5).draw().beacon("drand quicknet round 1234567").fence().args());
        assertEquals(List.of("END", "5", "DRAW", "BEACON", "b"), new InitOptions().beacon("b").endMs(5).draw().args(),
                "BEACON follows DRAW whatever the order of the calls");
        assertThrows(IllegalArgumentException.class, () -> new InitOptions().endMs(5).beacon("b").args(),
                "a beacon without DRAW");
        new InitOptions().beacon("n".repeat(256));
        assertThrows(IllegalArgumentException.class, () -> new InitOptions().beacon("n".repeat(257)));
        assertThrows(IllegalArgumentException.class, () -> new InitOptions().beacon(""));

        // what goes on the wire, on both backends, sync and async
        Recording rec = new Recording();
        SeckillClient module = SeckillClient.builder(rec).backend(Backend.MODULE).build();
        SeckillClient lib = SeckillClient.builder(rec).backend(Backend.FUNCTIONS).build();
        module.sale("sale:{b}").draw(10, "v1");
        lib.sale("sale:{b}").draw(10, "v1");
        module.asyncSale("sale:{b}").draw(5, "v2");
        module.sale("sale:{b}").draw(5);
        lib.sale("sale:{b}").init(2, new InitOptions().endMs(9).draw().beacon("name"));
        String s = "sale:{b}:secret", e = "sale:{b}:entrants", p = "sale:{b}:perm", w = "sale:{b}:wait";
        assertEquals(List.of(
                List.of("SECKILL.DRAW", "sale:{b}", "COUNT", "10", "BEACON", "v1"),
                List.of("FCALL_RO", "seckill_keys", "1", "sale:{b}"),
                List.of("FCALL", "seckill_draw", "5", "sale:{b}", e, p, w, s, "COUNT", "10", "BEACON", "v1"),
                List.of("SECKILL.DRAW", "sale:{b}", "COUNT", "5", "BEACON", "v2"),
                List.of("SECKILL.DRAW", "sale:{b}", "COUNT", "5"),
                List.of("FCALL", "seckill_init", "5", "sale:{b}", s, e, p, w, "2", "END", "9", "DRAW", "BEACON", "name")),
                rec.sent);
    }

    @Test
    void aCallRefusedAsUndeclaredGoesOnceMoreWithTheListAskedAgain() {
        Recording rec = new Recording();
        rec.refusals = 1;
        SeckillClient lib = SeckillClient.builder(rec).backend(Backend.FUNCTIONS).build();
        lib.sale("sale:{b}").draw(10);
        rec.sent.clear();
        rec.refusals = 1;
        lib.sale("sale:{b}").draw(10);                   // the cached list, refused: asked again
        List<String> call = List.of("FCALL", "seckill_draw", "5", "sale:{b}", "sale:{b}:entrants",
                "sale:{b}:perm", "sale:{b}:wait", "sale:{b}:secret", "COUNT", "10");
        List<String> keys = List.of("FCALL_RO", "seckill_keys", "1", "sale:{b}");
        assertEquals(List.of(call, keys, call), rec.sent);
        rec.sent.clear();
        rec.refusals = 2;                                // refused twice: the server's error
        Throwable ce = assertThrows(java.util.concurrent.CompletionException.class, () -> lib.asyncSale("sale:{b}")
                .draw(10).toCompletableFuture().join()).getCause();
        assertTrue(LibraryKeys.undeclared(ce), String.valueOf(ce));
        assertEquals(List.of(call, keys, call), rec.sent);
        rec.sent.clear();
        rec.refusals = 1;
        lib.asyncSale("sale:{b}").draw(10).toCompletableFuture().join();
        assertEquals(List.of(keys, call, keys, call), rec.sent);
        rec.sent.clear();
        lib.sale("sale:{b}").info();                     // INFO and GET: the sale key alone
        assertEquals(List.of("FCALL_RO", "seckill_info", "1", "sale:{b}", "FORMAT", "JSON"), rec.sent.get(0));
    }

    /**
     * A transport that records what it is asked and answers a fixed DRAW or INIT reply, a draw
     * sale's keys to seckill_keys, and refuses the next {@code refusals} library calls as
     * undeclared.
     */
    static final class Recording implements Transport {
        final List<List<String>> sent = new ArrayList<>();
        int refusals;

        @Override
        public Object call(Wire wire) {
            sent.add(wire.words());
            if (wire.words().get(1).equals("seckill_keys")) {   // a draw sale's list: no secret
                return List.copyOf(LibraryKeys.drawKeys(wire.words().get(3)).subList(1, 4));
            }
            if (wire.name().startsWith("FCALL") && refusals > 0) {
                refusals--;
                throw new CommandException("ERR undeclared key sale:{b}:perm: pass the keys FCALL_RO seckill_keys 1 "
                        + "sale:{b} lists after the sale key", null);
            }
            if (wire.name().equals("FCALL_RO")) {
                return null;
            }
            return wire.words().contains("COUNT") ? List.of(1L, 0L, 0L) : "OK";
        }
    }

    @Test
    void aLedgerGoesInChunksOfAtMostAThousand() {
        List<Order> ledger = IntStream.range(0, 2501).mapToObj(i -> new Order("o" + i, "u" + i, 1)).toList();
        List<Integer> sizes = new ArrayList<>();
        Protocol.chunks(ledger, 1000).forEach(c -> sizes.add(c.size()));
        assertEquals(List.of(1000, 1000, 501), sizes);
        List<String> first = Protocol.reconcileArgs(ledger.subList(0, 2), true, true);
        assertEquals(List.of("EXPIRE", "ORDERS", "2", "o0", "u0", "1", "o1", "u1", "1", "APPLY", "FORMAT", "JSON"), first);
        assertThrows(IllegalArgumentException.class, () -> Protocol.chunks(ledger, 1001));
        assertThrows(IllegalArgumentException.class, () -> Protocol.reconcileArgs(ledger.subList(0, 1001), false, false));
        assertThrows(IllegalArgumentException.class, () -> new Order("o", "u", 0));
    }

    @Test
    void theRetryPolicyIsBounded() {
        RetryPolicy p = RetryPolicy.DEFAULT;
        SplittableRandom r = new SplittableRandom(7);
        long total = 0;
        for (int a = 1; a < p.attempts(); a++) {
            long d = p.delayMs(a, r);
            long backoff = Math.min(500, 10L << (a - 1));
            assertTrue(d >= backoff / 2 && d <= backoff, "attempt " + a + ": " + d);
            total += d;
        }
        assertTrue(total <= p.maxTotalWaitMs());
        assertEquals(1130, p.maxTotalWaitMs(), "10+20+40+80+160+320+500 ms at most");
        long late = new RetryPolicy(100, 10, 500).delayMs(99, r);
        assertTrue(late >= 250 && late <= 500, "capped at maxMs: " + late);
        assertThrows(IllegalArgumentException.class, () -> new RetryPolicy(0, 10, 500));
    }

    @Test
    void badRepliesAreProtocolErrors() {
        assertThrows(ProtocolException.class, () -> Protocol.parseReserved(List.of("RESERVED", "id")));
        assertThrows(ProtocolException.class, () -> Protocol.parseReserved(List.of("MAYBE", "id", 1L)));
        assertThrows(ProtocolException.class, () -> Protocol.parseSettled(List.of("ALREADY_CONFIRMED", 1L),
                SettleStatus.RELEASE, "SECKILL.RELEASE"));
        assertThrows(ProtocolException.class, () -> Protocol.parseReportJson("{\"total\":1}"));
        assertThrows(ProtocolException.class, () -> Protocol.parseReportJson("[1]"));
        assertThrows(ProtocolException.class, () -> Protocol.parseInit("MAYBE"));
        assertEquals(new Reserved(ReserveStatus.FENCED, null, 4),
                Protocol.parseReserved(java.util.Arrays.asList("FENCED", null, 4L)));
        assertEquals(UnfenceStatus.NOT_FENCED, Protocol.parseUnfence("NOT_FENCED"));
    }

    @Test
    void theFenceFieldOfAReport() {
        Report r = Protocol.parseReportJson("{\"total\":5,\"remaining\":5,\"pending\":0,\"confirmed\":0,"
                + "\"released\":0,\"expired\":0,\"buyers\":0,\"reservations\":0,\"shards\":[5],"
                + "\"invariant\":\"ok\",\"fence\":\"fenced\"}");
        assertTrue(r.fenced());
        assertEquals("fenced", r.fence());
    }
}
