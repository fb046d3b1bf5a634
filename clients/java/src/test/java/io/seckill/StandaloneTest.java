package io.seckill;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.seckill.Flavour.Api;
import io.seckill.Flavour.Conn;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;
import redis.clients.jedis.Jedis;
import redis.clients.jedis.exceptions.JedisDataException;

/**
 * The Sale API against real servers, every flavour (Jedis RESP2/RESP3, Lettuce sync
 * RESP3/RESP2, Lettuce async) on both backends: a redis-server with the module (and the
 * library loaded beside it, for the FUNCTIONS backend), a plain one with the library only
 * (detected as FUNCTIONS), a plain one with neither (refused).
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class StandaloneTest {
    private final RedisServers servers = new RedisServers();
    private RedisServers.Node mod;
    private RedisServers.Node plain;
    private RedisServers.Node empty;

    @BeforeAll
    void start() throws Exception {
        mod = servers.startWithModule();
        RedisServers.loadLibrary(mod);
        plain = servers.start(false);
        RedisServers.loadLibrary(plain);
        empty = servers.start(false);
        System.out.println("StandaloneTest on " + RedisServers.version(mod));
    }

    @AfterAll
    void stop() {
        servers.close();
    }

    static Stream<Arguments> flavours() {
        List<Arguments> out = new ArrayList<>();
        for (Flavour f : Flavour.values()) {
            for (Backend b : Backend.values()) {
                out.add(Arguments.of(f, b));
            }
        }
        return out.stream();
    }

    private Conn open(Flavour f, Backend b) {
        return f.standalone(mod.port, SeckillClient.builder().backend(b));
    }

    private static String key(String what, Flavour f, Backend b) {
        return "sale:{" + what + "-" + f + "-" + b + "}";
    }

    /** The server's own answer to a command, as redis-cli would print the error. */
    private String serverError(String... words) {
        try (Jedis j = mod.admin()) {
            Object r = j.sendCommand(() -> redis.clients.jedis.util.SafeEncoder.encode(words[0]),
                    java.util.Arrays.copyOfRange(words, 1, words.length));
            throw new AssertionError("no error: " + r);
        } catch (JedisDataException e) {
            return e.getMessage();
        }
    }

    private long calls(String command) {
        String v = RedisServers.info(mod, "commandstats").get("cmdstat_" + command);
        return v == null ? 0 : Long.parseLong(v.replaceAll("^calls=(\\d+),.*", "$1"));
    }

    @ParameterizedTest(name = "{0} {1}")
    @MethodSource("flavours")
    void aSaleFromInitToConfirm(Flavour f, Backend b) throws Exception {
        try (Conn c = open(f, b)) {
            String key = key("life", f, b);
            Api sale = c.sale(key);
            assertTrue(sale.init(3, new InitOptions().limit(2).holdMs(60_000)));
            assertFalse(sale.init(3, new InitOptions()), "EXISTS: nothing changed");

            Reserved r1 = sale.reserve("u1", 1, "order-1");
            assertEquals(new Reserved(ReserveStatus.RESERVED, "order-1", 2), r1);
            assertEquals(new Reserved(ReserveStatus.DUPLICATE, "order-1", 2), sale.reserve("u1", 1, "order-1"));
            assertEquals(new Reserved(ReserveStatus.RESERVED, "order-2", 1), sale.reserve("u1", 1, "order-2"));
            Reserved limit = sale.reserve("u1", 1, "order-3");
            assertEquals(ReserveStatus.LIMIT, limit.status());
            assertEquals("order-2", limit.id(), "LIMIT carries the user's latest live reservation");
            assertEquals(new Reserved(ReserveStatus.RESERVED, "order-4", 0), sale.reserve("u2", 1, "order-4"));
            assertEquals(new Reserved(ReserveStatus.SOLD_OUT, null, 0), sale.reserve("u3", 1, "order-5"));

            assertEquals(new Settled(SettleStatus.RELEASED, 1), sale.release("order-2"));
            assertEquals(new Settled(SettleStatus.ALREADY_RELEASED, 1), sale.release("order-2"));
            assertEquals(new Settled(SettleStatus.CONFIRMED, 1), sale.confirm("order-1"));
            assertEquals(new Settled(SettleStatus.ALREADY_CONFIRMED, 1), sale.confirm("order-1"));
            assertEquals(new Settled(SettleStatus.NOT_FOUND, 1), sale.confirm("nope"));

            Report info = sale.info();
            assertEquals(3, info.total());
            assertEquals(1, info.remaining());
            assertEquals(1, info.pending());
            assertEquals(1, info.confirmed());
            assertEquals(1, info.released());
            assertEquals(List.of(1L), info.shards());
            assertTrue(info.invariantOk());
            assertNull(info.fence(), "a sale without FENCE has no fence field");

            Reservation g = sale.get("order-4");
            assertEquals("u2", g.user());
            assertEquals(1, g.qty());
            assertEquals("pending", g.state());
            assertEquals(60_000, g.deadlineMs() - g.createdMs());
            assertNull(sale.get("nope"));

            Api missing = c.sale(key("missing", f, b));
            assertNull(missing.info());
            assertNull(missing.get("order-1"));
            assertEquals(new Reserved(ReserveStatus.NO_SALE, null, 0), missing.reserve("u1", 1, null));
            assertEquals(new Settled(SettleStatus.NOT_FOUND, 0), missing.release("order-1"));
        }
    }

    @ParameterizedTest(name = "{0} {1}")
    @MethodSource("flavours")
    void serverErrorsArriveWordForWord(Flavour f, Backend b) throws Exception {
        try (Conn c = open(f, b)) {
            String key = key("err", f, b);
            Api sale = c.sale(key);
            sale.init(10, new InitOptions().limit(2));
            CommandException e = assertThrows(CommandException.class, () -> sale.reserve("u1", 3, null));
            assertEquals("ERR", e.code());
            String direct = b == Backend.MODULE
                    ? serverError("SECKILL.RESERVE", key, "u1", "QTY", "3")
                    : serverError("FCALL", "seckill_reserve", "1", key, "u1", "QTY", "3");
            assertEquals(direct, e.getMessage());
            assertEquals(10, sale.info().remaining(), "a refused call changed nothing");

            e = assertThrows(CommandException.class, () -> sale.init(10, new InitOptions().limit(1).limit(2)));
            assertEquals("ERR option LIMIT given twice", e.getMessage());

            String str = key("string", f, b);
            try (Jedis j = mod.admin()) {
                j.set(str, "x");
            }
            e = assertThrows(CommandException.class, () -> c.sale(str).reserve("u1", 1, null));
            assertEquals("WRONGTYPE", e.code());

            assertThrows(IllegalArgumentException.class, () -> sale.reserve("", 1, null), "empty user");
            assertThrows(IllegalArgumentException.class, () -> sale.reserve("u".repeat(257), 1, null));
        }
    }

    @ParameterizedTest(name = "{0} {1}")
    @MethodSource("flavours")
    void reconcileSendsTheLedgerInChunksOfAtMostAThousand(Flavour f, Backend b) throws Exception {
        try (Conn c = open(f, b)) {
            String key = key("rec", f, b);
            Api sale = c.sale(key);
            sale.init(3000, new InitOptions().limit(1).holdMs(600_000));
            List<Order> ledger = new ArrayList<>();
            for (int i = 0; i < 300; i++) {
                assertTrue(sale.reserve("u" + i, 1, "o" + i).ok());
                ledger.add(new Order("o" + i, "u" + i, 1));
            }
            for (int i = 300; i < 2500; i++) {
                ledger.add(new Order("o" + i, "u" + i, 1));   // orders the sale never saw
            }
            ReconcileResult dry = sale.reconcile(ledger, false, false, 1000);
            assertEquals(3, dry.calls());
            assertEquals(300, dry.counts().get("pending"));
            assertEquals(2200, dry.counts().get("unknown"));
            assertEquals(2200, dry.ids().get("unknown").size());
            assertEquals("o300", dry.ids().get("unknown").get(0), "the ids of every chunk, in ledger order");
            assertEquals("o2499", dry.ids().get("unknown").get(2199));
            assertFalse(dry.clean());
            assertEquals(2700, dry.report().remaining(), "without APPLY nothing changed");

            ReconcileResult applied = sale.reconcile(ledger, true, false, 1000);
            assertEquals(3, applied.calls());
            assertEquals(0, applied.counts().get("conflict"));
            assertEquals(2500, applied.report().confirmed());
            assertEquals(500, applied.report().remaining());
            assertTrue(applied.report().invariantOk());
            assertNull(applied.unfenced(), "no fence: UNFENCE not called");

            ReconcileResult again = sale.reconcile(ledger, false, false, 1000);
            assertTrue(again.clean());
            assertEquals(2500, again.counts().get("ok"));

            ReconcileResult empty = sale.reconcile(List.of(), false, true, 1000);
            assertEquals(1, empty.calls(), "an empty ledger: one call for the report");
            assertThrows(IllegalArgumentException.class, () -> sale.reconcile(ledger, false, false, 1001));
            assertThrows(SaleMissingException.class,
                    () -> c.sale(key("gone", f, b)).reconcile(ledger, false, false, 1000));
        }
    }

    @ParameterizedTest(name = "{0} {1}")
    @MethodSource("flavours")
    void theLocalSoldOutFlagIsSetByRedisOnlyAndLapses(Flavour f, Backend b) throws Exception {
        SoldOutFlags flags = new SoldOutFlags();
        try (Conn c = f.standalone(mod.port, SeckillClient.builder().backend(b).localSoldOut(flags));
             Conn other = open(f, b)) {
            String key = key("flag", f, b);
            Api sale = c.sale(key);
            sale.init(2, new InitOptions().limit(1));
            String command = b == Backend.MODULE ? "seckill.reserve" : "fcall";

            try (Jedis j = mod.admin()) {   // a sold-out message alone sets nothing
                j.publish("seckill:events:" + key, "seckill.soldout");
                j.publish("__keyspace@0__:" + key, "seckill.soldout");
            }
            assertEquals(ReserveStatus.RESERVED, sale.reserve("u1", 1, "a").status());
            assertEquals(new Reserved(ReserveStatus.RESERVED, "b", 0), sale.reserve("u2", 1, "b"));
            long before = calls(command);
            assertEquals(new Reserved(ReserveStatus.SOLD_OUT, null, 0), sale.reserve("u3", 1, "c"));
            assertEquals(before, calls(command), "answered locally, no call to Redis");
            assertEquals(1, flags.localAnswers());

            other.sale(key).release("b");   // stock back, through another client
            long t0 = System.nanoTime();
            Reserved r = sale.reserve("u3", 1, "c");
            for (int i = 0; i < 200 && r.status() == ReserveStatus.SOLD_OUT; i++) {   // the flag lapses within 500 ms
                Thread.sleep(20);
                r = sale.reserve("u3", 1, "c");
            }
            long waitedMs = (System.nanoTime() - t0) / 1_000_000;
            assertEquals(new Reserved(ReserveStatus.RESERVED, "c", 0), r);
            System.out.printf("local sold-out flag (%s %s): restock seen after %d ms%n", f, b, waitedMs);
        }
    }

    @ParameterizedTest(name = "{0} {1}")
    @MethodSource("flavours")
    void unfenceOnServersThatHaveTheFence(Flavour f, Backend b) throws Exception {
        String probe = b == Backend.MODULE ? "SECKILL.UNFENCE" : "FCALL";
        boolean has;
        try (Jedis j = mod.admin()) {
            Object r = b == Backend.MODULE
                    ? j.sendCommand(() -> probe.getBytes(), "sale:{probe}")
                    : j.sendCommand(() -> probe.getBytes(), "seckill_unfence", "1", "sale:{probe}");
            has = r != null;
        } catch (JedisDataException e) {
            has = false;
        }
        assumeTrue(has, "the server under test has no UNFENCE yet (the fence is being added)");
        try (Conn c = open(f, b)) {
            String key = key("fence", f, b);
            Api sale = c.sale(key);
            assertEquals(UnfenceStatus.NO_SALE, sale.unfence());
            sale.init(5, new InitOptions().fence());
            assertEquals("clear", sale.info().fence());
            assertEquals(UnfenceStatus.NOT_FENCED, sale.unfence());
            assertEquals(ReserveStatus.RESERVED, sale.reserve("u1", 1, "f1").status());
        }
    }

    /** The server's clock in ms (END is read against it). */
    private long serverMs() {
        try (Jedis j = mod.admin()) {
            List<String> t = j.time();
            return Long.parseLong(t.get(0)) * 1000 + Long.parseLong(t.get(1)) / 1000;
        }
    }

    @ParameterizedTest(name = "{0} {1}")
    @MethodSource("flavours")
    void aDrawSaleFromEnterToEntrants(Flavour f, Backend b) throws Exception {
        try (Conn c = open(f, b)) {
            String key = key("draw", f, b);
            Api sale = c.sale(key);
            long end = serverMs() + 300;
            assertTrue(sale.init(2, new InitOptions().endMs(end).draw()));
            assertEquals(ReserveStatus.DRAW, sale.reserve("u1", 1, null).status(), "a draw sale refuses RESERVE");

            assertEquals(new Entered(EnterStatus.ENTERED, 1), sale.enter("u1", 1, "e-u1"));
            assertEquals(new Entered(EnterStatus.ENTERED, 2), sale.enter("u2", 1, "e-u2"));
            assertEquals(new Entered(EnterStatus.ENTERED, 3), sale.enter("u3", 1, null));
            Entered again = sale.enter("u1", 1, "e-u1");
            assertEquals(new Entered(EnterStatus.ALREADY_ENTERED, 3), again);
            assertTrue(again.ok());

            EntrantsPage first = sale.entrants("0", 2);
            assertFalse(first.last());
            assertEquals(List.of(new Entrant("u1", 1, Entrant.ENTERED), new Entrant("u2", 1, Entrant.ENTERED)),
                    first.entrants(), "arrival order, none drawn yet");
            CommandException early = assertThrows(CommandException.class, () -> sale.draw(10));
            assertEquals("ERR", early.code(), "DRAW while registration is open: " + early.getMessage());

            RedisServers.waitFor(() -> serverMs() > end, 5_000, "the END of registration");
            assertEquals(EnterStatus.ENDED, sale.enter("u4", 1, null).status());
            Drawn one = sale.draw(1);
            assertEquals(1, one.drawn());
            assertFalse(one.done());
            long drawn = one.drawn();
            for (int i = 0; i < 10; i++) {
                Drawn d = sale.draw(100);
                drawn += d.drawn();
                if (d.done()) {
                    assertEquals(0, d.remaining());
                    break;
                }
            }
            assertEquals(2, drawn);

            List<Entrant> all = new ArrayList<>();
            String cursor = "0";
            for (int pages = 0; pages < 10; pages++) {
                EntrantsPage p = sale.entrants(cursor, 2);
                all.addAll(p.entrants());
                cursor = p.cursor();
                if (p.last()) {
                    break;
                }
            }
            assertEquals(List.of("u1", "u2", "u3"), all.stream().map(Entrant::user).toList());
            assertEquals(2, all.stream().filter(Entrant::won).count(), all.toString());
            Report info = sale.info();
            assertEquals("draw", info.fields().get("mode"));
            assertEquals(2L, info.fields().get("drawn"));
            assertEquals(2, info.pending(), "the winners hold reservations");

            assertEquals(EnterStatus.NO_SALE, c.sale(key("draw-none", f, b)).enter("u1", 1, null).status());
            assertThrows(IllegalArgumentException.class, () -> sale.draw(0));
            assertThrows(IllegalArgumentException.class, () -> sale.entrants("0", 1001));
        }
    }

    /**
     * The keys the library's calls declare (docs/managed-redis.md, "Calling it"), both backends
     * alike: a sale with a STREAM; another client replaces it with another stream, so this
     * client's list is stale (on the library: one refusal, seckill_keys again, the retry); a draw
     * sale with a stream, replaced by the other client with a plain sale (its four keys go).
     */
    @ParameterizedTest(name = "{0} {1}")
    @MethodSource("flavours")
    void theLibrarysKeysAreDeclared(Flavour f, Backend b) throws Exception {
        try (Conn a = open(f, b); Conn other = open(f, b); Jedis admin = mod.admin()) {
            String key = key("keys", f, b);
            String ev1 = key + ":ev1", ev2 = key + ":ev2";
            assertTrue(a.sale(key).init(10, new InitOptions().stream(ev1).holdMs(60_000)));
            assertEquals(ReserveStatus.RESERVED, a.sale(key).reserve("u1", 1, "o1").status());
            assertTrue(other.sale(key).init(10, new InitOptions().stream(ev2).replace()));
            long refused = failedFcalls();
            assertEquals(new Reserved(ReserveStatus.RESERVED, "o2", 9), a.sale(key).reserve("u2", 1, "o2"));
            assertEquals(b == Backend.FUNCTIONS ? 1 : 0, failedFcalls() - refused, "one refusal, then the retry");
            assertEquals(1, admin.xlen(ev1));
            assertEquals(1, admin.xlen(ev2));
            assertEquals(SettleStatus.CONFIRMED, a.sale(key).confirm("o2").status());

            String draw = key("keys-draw", f, b);
            List<String> four = LibraryKeys.drawKeys(draw);
            assertTrue(a.sale(draw).init(2, new InitOptions().endMs(serverMs() + 60_000).draw().stream(draw + ":ev")));
            assertEquals(EnterStatus.ENTERED, a.sale(draw).enter("u1", 1, null).status());
            assertEquals(b == Backend.FUNCTIONS ? 2 : 0, admin.exists(four.get(0), four.get(1)));
            assertTrue(other.sale(draw).init(5, new InitOptions().replace()));
            assertEquals(0, admin.exists(four.toArray(new String[0])), "INIT REPLACE deletes a draw sale's keys");
            assertEquals(ReserveStatus.RESERVED, a.sale(draw).reserve("u1", 1, null).status());
        }
    }

    private long failedFcalls() {
        String v = RedisServers.info(mod, "commandstats").get("cmdstat_fcall");
        return v == null ? 0 : Long.parseLong(v.replaceAll("^.*failed_calls=(\\d+).*$", "$1"));
    }

    @Test
    void theBackendIsDetectedOncePerClient() throws Exception {
        for (Flavour f : List.of(Flavour.JEDIS_RESP2, Flavour.LETTUCE_SYNC_RESP3)) {
            try (Conn c = f.standalone(mod.port, SeckillClient.builder())) {
                assertEquals(Backend.MODULE, c.client().backend("sale:{x}"));
            }
            try (Conn c = f.standalone(plain.port, SeckillClient.builder())) {
                assertEquals(Backend.FUNCTIONS, c.client().backend("sale:{x}"));
                Sale s = c.client().sale("sale:{detected-" + f + "}");
                assertTrue(s.init(1, new InitOptions()));
                assertEquals(ReserveStatus.RESERVED, s.reserve("u1").status());
            }
            try (Conn c = f.standalone(empty.port, SeckillClient.builder())) {
                BackendException e = assertThrows(BackendException.class, () -> c.client().sale("sale:{x}").info());
                assertTrue(e.getMessage().contains("FUNCTION LOAD functions/seckill.lua"), e.getMessage());
            }
        }
        assertNotNull(RedisServers.info(plain, "server").get("redis_version"));
    }
}
