package io.seckill;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.seckill.Flavour.Api;
import io.seckill.Flavour.Conn;
import io.seckill.recipes.SpringDataRecipe;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;
import org.springframework.data.redis.connection.RedisClusterConfiguration;
import org.springframework.data.redis.connection.lettuce.LettuceConnectionFactory;
import redis.clients.jedis.Jedis;

/**
 * A three-master Redis Cluster with the module (and the library loaded on every master, for
 * the FUNCTIONS backend): every flavour routes every call by the sale key, so INFO
 * errorstats counts 0 MOVED and 0 ASK on every node; TRYAGAIN during a real slot migration
 * is retried until the sale has moved.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class ClusterTest {
    private static final int BUYERS = 50;
    private final RedisServers servers = new RedisServers();
    private List<RedisServers.Node> nodes;
    private List<Integer> ports;

    @BeforeAll
    void start() throws Exception {
        nodes = servers.startCluster(3);
        for (RedisServers.Node n : nodes) {
            RedisServers.loadLibrary(n);
        }
        ports = nodes.stream().map(n -> n.port).toList();
        System.out.println("ClusterTest on " + RedisServers.version(nodes.get(0)));
    }

    @AfterAll
    void stop() {
        servers.close();
    }

    static Stream<Arguments> flavours() {
        return StandaloneTest.flavours();
    }

    @ParameterizedTest(name = "{0} {1}")
    @MethodSource("flavours")
    void fiftyBuyersWithNoMoved(Flavour f, Backend b) throws Exception {
        try (Conn c = f.cluster(ports, SeckillClient.builder().backend(b))) {
            // keys in every master's slots: the calls must each find their node
            List<String> keys = List.of("sale:{a-" + f + b + "}", "sale:{b-" + f + b + "}", "sale:{c-" + f + b + "}");
            for (String k : keys) {
                assertTrue(c.sale(k).init(60, new InitOptions().limit(2).stream(k + ":events")));
            }
            RedisServers.resetStats(nodes);
            ExecutorService pool = Executors.newFixedThreadPool(BUYERS);
            List<Future<List<Reserved>>> futures = new ArrayList<>();
            for (int u = 0; u < BUYERS; u++) {
                String user = "user:" + u;
                String key = keys.get(u % keys.size());
                futures.add(pool.submit(() -> {
                    Api sale = c.sale(key);
                    List<Reserved> got = new ArrayList<>();
                    for (int i = 0; i < 3; i++) {
                        got.add(sale.reserve(user, 1, user + "-" + i));
                    }
                    got.add(sale.reserve(user, 1, user + "-0"));   // a retry of the first: DUPLICATE
                    return got;
                }));
            }
            Map<String, Long> units = new HashMap<>();
            for (int u = 0; u < BUYERS; u++) {
                List<Reserved> got = futures.get(u).get(60, TimeUnit.SECONDS);
                String user = "user:" + u;
                Set<String> mine = new HashSet<>();
                for (int i = 0; i < 3; i++) {
                    Reserved r = got.get(i);
                    if (r.status() == ReserveStatus.RESERVED) {
                        assertEquals(user + "-" + i, r.id());
                        mine.add(r.id());
                        units.merge(keys.get(u % keys.size()), 1L, Long::sum);
                    } else {
                        assertEquals(ReserveStatus.LIMIT, r.status());
                        assertTrue(mine.contains(r.id()), "LIMIT names one of the user's own ids: " + r);
                    }
                }
                assertEquals(2, mine.size(), user + " holds its LIMIT of 2");
                assertEquals(new Reserved(ReserveStatus.DUPLICATE, user + "-0", got.get(3).remaining()), got.get(3));
            }
            pool.shutdown();
            assertTrue(pool.awaitTermination(10, TimeUnit.SECONDS));
            for (String k : keys) {
                Report r = c.sale(k).info();
                assertTrue(r.invariantOk());
                assertEquals(units.get(k), r.pending());
                assertEquals(60 - units.get(k), r.remaining());
            }
            long moved = RedisServers.errors(nodes, "MOVED");
            long ask = RedisServers.errors(nodes, "ASK");
            System.out.printf("cluster %s %s: %d RESERVEs, %d MOVED, %d ASK%n", f, b, BUYERS * 4, moved, ask);
            assertEquals(0, moved, "every call went to the key's node");
            assertEquals(0, ask);
        }
    }

    @ParameterizedTest(name = "{0} {1}")
    @MethodSource("flavours")
    void tryAgainIsRetriedUntilTheSaleHasMoved(Flavour f, Backend b) throws Exception {
        try (Conn c = f.cluster(ports, SeckillClient.builder().backend(b))) {
            String tag = "ta-" + f + "-" + b;
            String key = "sale:{" + tag + "}";
            String stream = key + ":events";
            Api sale = c.sale(key);
            sale.init(10, new InitOptions().limit(5).stream(stream));
            assertEquals(ReserveStatus.RESERVED, sale.reserve("user:0", 1, tag + "-0").status());   // the stream exists

            Migration m = migrateStreamFirst(key, stream);
            Conn bare = f.cluster(ports, SeckillClient.builder().backend(b).retry(RetryPolicy.NONE));
            try (bare) {
                CommandException e = assertThrows(CommandException.class,
                        () -> bare.sale(key).reserve("user:1", 1, tag + "-bare"));
                // the module answers TRYAGAIN; so does the server for the library's call, which
                // declares the stream beside the sale (keys of one slot split mid-migration)
                assertTrue(e.tryAgain(), e.getMessage());
                assertTrue(e.retryable());
            }
            long before = c.client().tryAgainRetries();
            Thread finisher = new Thread(() -> {
                sleep(150);
                m.finish();
            });
            finisher.start();
            Reserved r = sale.reserve("user:1", 1, tag + "-1");
            finisher.join(30_000);
            long retries = c.client().tryAgainRetries() - before;
            assertEquals(new Reserved(ReserveStatus.RESERVED, tag + "-1", 8), r);
            assertTrue(retries >= 1, "TRYAGAIN was retried");
            System.out.printf("TRYAGAIN %s %s: %d retries, then RESERVED on the new node%n", f, b, retries);
            Report info = sale.info();
            assertEquals(2, info.pending());
            assertTrue(info.invariantOk());
            try (Jedis j = m.dst.admin()) {
                assertEquals(2, j.xlen(stream), "both entries in the one stream, on the new node");
            }
        }
    }

    @ParameterizedTest(name = "{0}")
    @org.junit.jupiter.params.provider.EnumSource(Flavour.class)
    void theBackendIsDetectedOnTheCluster(Flavour f) {
        try (Conn c = f.cluster(ports, SeckillClient.builder())) {
            String key = "sale:{detect-" + f + "}";
            RedisServers.resetStats(nodes);
            assertTrue(c.sale(key).init(1, new InitOptions()));
            assertEquals(Backend.MODULE, c.client().backend(key));
            assertEquals(ReserveStatus.RESERVED, c.sale(key).reserve("u1", 1, null).status());
            assertEquals(0, RedisServers.errors(nodes, "MOVED"));
        }
    }

    @org.junit.jupiter.api.Test
    void theDocsSpringDataRecipeRoutesByTheSaleKey() throws Exception {
        String key = "sale:{spring}";
        try (Conn c = Flavour.JEDIS_RESP3.cluster(ports, SeckillClient.builder().backend(Backend.MODULE))) {
            assertTrue(c.sale(key).init(10, new InitOptions().limit(2)));
        }
        LettuceConnectionFactory factory = new LettuceConnectionFactory(
                new RedisClusterConfiguration(ports.stream().map(p -> "127.0.0.1:" + p).toList()));
        factory.afterPropertiesSet();
        factory.start();
        RedisServers.resetStats(nodes);
        SpringDataRecipe.Replies got;
        try {
            got = SpringDataRecipe.run(factory, key, "user:1", "order-1");
        } finally {
            factory.destroy();
        }
        assertEquals(10, new com.fasterxml.jackson.databind.ObjectMapper().readTree(got.json()).get("remaining").asLong());
        List<Object> r = got.reserve();
        assertEquals(3, r.size(), r.toString());
        assertEquals("RESERVED", new String((byte[]) r.get(0), StandardCharsets.UTF_8), "the status as byte[]");
        assertEquals("order-1", new String((byte[]) r.get(1), StandardCharsets.UTF_8), "the id as byte[]");
        assertEquals(9L, r.get(2));
        assertEquals(0, RedisServers.errors(nodes, "MOVED"), "both calls went to the key's node");
        assertEquals(0, RedisServers.errors(nodes, "ASK"));
    }

    @org.junit.jupiter.api.Test
    void theCounterSeesAMisroutedCall() {
        // the control for the 0 above: a call sent to a node that does not serve the key counts
        String key = "sale:{control}";
        RedisServers.Node wrong;
        try (Jedis j = nodes.get(0).admin()) {
            int slot = (int) j.clusterKeySlot(key);
            wrong = nodes.stream().filter(n -> {
                try (Jedis k = n.admin()) {
                    return !servesSlot(k, slot);
                }
            }).findFirst().orElseThrow();
        }
        RedisServers.resetStats(nodes);
        try (Jedis j = wrong.admin()) {
            assertThrows(redis.clients.jedis.exceptions.JedisDataException.class,
                    () -> j.sendCommand(() -> "SECKILL.RESERVE".getBytes(), key, "u1"));
        }
        assertEquals(1, RedisServers.errors(nodes, "MOVED"));
    }

    private static boolean servesSlot(Jedis j, int slot) {
        String me = j.clusterNodes().lines().filter(l -> l.contains("myself")).findFirst().orElseThrow();
        String[] parts = me.split(" ");
        for (int i = 8; i < parts.length; i++) {
            String[] range = parts[i].split("-");
            if (range[0].startsWith("[")) {
                continue;
            }
            int lo = Integer.parseInt(range[0]);
            int hi = range.length > 1 ? Integer.parseInt(range[1]) : lo;
            if (slot >= lo && slot <= hi) {
                return true;
            }
        }
        return false;
    }

    /** A slot migration with the stream moved ahead of the sale; finish() moves the sale. */
    private final class Migration {
        final RedisServers.Node src;
        final RedisServers.Node dst;
        final int slot;
        final String key;

        Migration(RedisServers.Node src, RedisServers.Node dst, int slot, String key) {
            this.src = src;
            this.dst = dst;
            this.slot = slot;
            this.key = key;
        }

        void finish() {
            try (Jedis s = src.admin()) {
                s.migrate("127.0.0.1", dst.port, 0, 5000, new redis.clients.jedis.params.MigrateParams(), key);
            }
            List<RedisServers.Node> order = new ArrayList<>(List.of(dst, src));
            nodes.stream().filter(n -> n != src && n != dst).forEach(order::add);
            for (RedisServers.Node n : order) {
                try (Jedis j = n.admin()) {
                    j.clusterSetSlotNode(slot, dst.id);
                }
            }
        }
    }

    private Migration migrateStreamFirst(String key, String stream) {
        int slot;
        RedisServers.Node src = null;
        try (Jedis j = nodes.get(0).admin()) {
            slot = (int) j.clusterKeySlot(key);
        }
        for (RedisServers.Node n : nodes) {
            try (Jedis j = n.admin()) {
                if (j.clusterCountKeysInSlot(slot) > 0) {
                    src = n;
                }
            }
        }
        RedisServers.Node from = src;
        RedisServers.Node dst = nodes.stream().filter(n -> n != from).findFirst().orElseThrow();
        try (Jedis d = dst.admin(); Jedis s = src.admin()) {
            assertEquals("OK", d.clusterSetSlotImporting(slot, src.id));
            assertEquals("OK", s.clusterSetSlotMigrating(slot, dst.id));
            assertEquals("OK", s.migrate("127.0.0.1", dst.port, 0, 5000,
                    new redis.clients.jedis.params.MigrateParams(), stream));
        }
        return new Migration(src, dst, slot, key);
    }

    private static void sleep(long ms) {
        try {
            Thread.sleep(ms);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
