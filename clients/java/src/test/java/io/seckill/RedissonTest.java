package io.seckill;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.seckill.recipes.RedissonShimRecipe;
import io.seckill.redisson.RedissonTransport;
import java.util.Arrays;
import java.util.List;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.redisson.Redisson;
import org.redisson.api.RedissonClient;
import org.redisson.config.Config;

/**
 * Redisson's RFunction drives the Functions library on a plain server (no module); the docs'
 * RScript shim drives the module on a server of its own.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class RedissonTest {
    private final RedisServers servers = new RedisServers();
    private RedisServers.Node plain;
    private RedissonClient redisson;
    private SeckillClient client;

    @BeforeAll
    void start() throws Exception {
        plain = servers.start(false);
        RedisServers.loadLibrary(plain);
        Config config = new Config();
        config.useSingleServer().setAddress("redis://127.0.0.1:" + plain.port).setConnectionMinimumIdleSize(1)
                .setConnectionPoolSize(2);
        redisson = Redisson.create(config);
        client = SeckillClient.builder(new RedissonTransport(redisson)).backend(Backend.FUNCTIONS).build();
    }

    @AfterAll
    void stop() {
        if (redisson != null) {
            redisson.shutdown();
        }
        servers.close();
    }

    @Test
    void theSaleApiOverRFunction() {
        Sale sale = client.sale("sale:{redisson}");
        assertTrue(sale.init(2, new InitOptions().limit(1).holdMs(60_000)));
        assertEquals(new Reserved(ReserveStatus.RESERVED, "r1", 1), sale.reserve("u1", 1, "r1"));
        assertEquals(new Reserved(ReserveStatus.DUPLICATE, "r1", 1), sale.reserve("u1", 1, "r1"));
        assertEquals(new Reserved(ReserveStatus.LIMIT, "r1", 1), sale.reserve("u1", 1, "r2"));
        assertEquals(new Reserved(ReserveStatus.RESERVED, "r3", 0), sale.reserve("u2", 1, "r3"));
        assertEquals(new Reserved(ReserveStatus.SOLD_OUT, null, 0), sale.reserve("u3", 1, "r4"));
        assertEquals(new Settled(SettleStatus.RELEASED, 1), sale.release("r3"));
        assertEquals(new Settled(SettleStatus.CONFIRMED, 1), sale.confirm("r1"));
        Report info = sale.info();
        assertEquals(1, info.confirmed());
        assertEquals(List.of(1L), info.shards());
        assertTrue(info.invariantOk());
        assertEquals("confirmed", sale.get("r1").state());
        assertNull(sale.get("nope"));
        assertNull(client.sale("sale:{none}").info());
        ReconcileResult rec = sale.reconcile(List.of(new Order("r1", "u1", 1)), false);
        assertTrue(rec.clean());
    }

    @Test
    void errorsKeepTheServersTextAndTheModuleBackendIsRefused() {
        Sale sale = client.sale("sale:{redisson-err}");
        sale.init(5, new InitOptions().limit(1));
        CommandException e = assertThrows(CommandException.class, () -> sale.reserve("u1", 2, null));
        assertEquals("ERR QTY is above the sale's LIMIT", e.getMessage());
        SeckillClient module = SeckillClient.builder(new RedissonTransport(redisson)).backend(Backend.MODULE).build();
        assertThrows(UnsupportedOperationException.class, () -> module.sale("sale:{x}").info());
    }

    @Test
    void aDrawSaleOverRFunction() {
        Sale sale = client.sale("sale:{redisson-draw}");
        long end;
        try (redis.clients.jedis.Jedis j = plain.admin()) {
            List<String> t = j.time();
            end = Long.parseLong(t.get(0)) * 1000 + Long.parseLong(t.get(1)) / 1000 + 300;
        }
        assertTrue(sale.init(1, new InitOptions().endMs(end).draw()));
        assertEquals(new Entered(EnterStatus.ENTERED, 1), sale.enter("u1", 1, "e1"));
        assertEquals(new Entered(EnterStatus.ENTERED, 2), sale.enter("u2"));
        assertEquals(new Entered(EnterStatus.ALREADY_ENTERED, 2), sale.enter("u1", 1, "e1"));
        RedisServers.waitFor(() -> {
            try (redis.clients.jedis.Jedis j = plain.admin()) {
                List<String> t = j.time();
                return Long.parseLong(t.get(0)) * 1000 + Long.parseLong(t.get(1)) / 1000 > end;
            }
        }, 5_000, "the END of registration");
        assertEquals(EnterStatus.ENDED, sale.enter("late", 1, null).status());
        Drawn d = sale.draw(10);
        assertEquals(1, d.drawn());
        EntrantsPage page = sale.entrants("0", 10);
        assertTrue(page.last());
        assertEquals(List.of("u1", "u2"), page.entrants().stream().map(Entrant::user).toList());
        assertEquals(1, page.entrants().stream().filter(Entrant::won).count());
    }

    @Test
    void theDocsLuaShimReachesTheModule() throws Exception {
        RedisServers.Node module = servers.startWithModule();
        Config config = new Config();
        config.useSingleServer().setAddress("redis://127.0.0.1:" + module.port).setConnectionMinimumIdleSize(1)
                .setConnectionPoolSize(2);
        RedissonClient shim = Redisson.create(config);
        try {
            String key = "sale:{shim}";
            try (redis.clients.jedis.Jedis j = module.admin()) {
                Object ok = j.sendCommand(() -> "SECKILL.INIT".getBytes(), key, "5", "LIMIT", "2");
                assertEquals("OK", redis.clients.jedis.util.SafeEncoder.encode((byte[]) ok));
            }
            assertEquals(List.of("RESERVED", "r1", 4L), RedissonShimRecipe.reserve(shim, key, "u1", "r1"));
            assertEquals(List.of("DUPLICATE", "r1", 4L), RedissonShimRecipe.reserve(shim, key, "u1", "r1"));
            // nil inside the array comes back as null: the Lua shim passes it through
            assertEquals(Arrays.asList("NO_SALE", null, 0L), RedissonShimRecipe.reserve(shim, "sale:{none}", "u1", "r2"));
        } finally {
            shim.shutdown();
        }
    }
}
