package io.seckill;

import io.lettuce.core.ClientOptions;
import io.lettuce.core.RedisClient;
import io.lettuce.core.RedisURI;
import io.lettuce.core.api.StatefulRedisConnection;
import io.lettuce.core.cluster.ClusterClientOptions;
import io.lettuce.core.cluster.RedisClusterClient;
import io.lettuce.core.cluster.api.StatefulRedisClusterConnection;
import io.lettuce.core.codec.StringCodec;
import io.lettuce.core.protocol.ProtocolVersion;
import io.seckill.jedis.JedisTransport;
import io.seckill.lettuce.LettuceTransport;
import java.time.Duration;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;
import redis.clients.jedis.DefaultJedisClientConfig;
import redis.clients.jedis.HostAndPort;
import redis.clients.jedis.JedisCluster;
import redis.clients.jedis.JedisPooled;
import redis.clients.jedis.RedisProtocol;

/**
 * The ways the tests drive the client: Jedis (RESP2, RESP3), Lettuce sync (RESP3, RESP2),
 * Lettuce async; one server or a cluster. {@link Api} makes sync and async look alike.
 */
enum Flavour {
    JEDIS_RESP2, JEDIS_RESP3, LETTUCE_SYNC_RESP3, LETTUCE_SYNC_RESP2, LETTUCE_ASYNC;

    boolean async() {
        return this == LETTUCE_ASYNC;
    }

    /** An open client and what closes it. */
    record Conn(SeckillClient client, AutoCloseable closer, Flavour flavour) implements AutoCloseable {
        Api sale(String key) {
            return flavour.async() ? new Api.Async(client.asyncSale(key)) : new Api.Sync(client.sale(key));
        }

        @Override
        public void close() {
            try {
                closer.close();
            } catch (Exception e) {
                throw new IllegalStateException("closing " + flavour, e);
            }
        }
    }

    Conn standalone(int port, SeckillClient.Builder options) {
        return connect(List.of(port), false, options, null, null);
    }

    /** One server, as the ACL user {@code user}. */
    Conn standalone(int port, SeckillClient.Builder options, String user, String password) {
        return connect(List.of(port), false, options, user, password);
    }

    Conn cluster(List<Integer> ports, SeckillClient.Builder options) {
        return connect(ports, true, options, null, null);
    }

    /** {@code options}: a builder whose transport is replaced (null transport placeholder). */
    private Conn connect(List<Integer> ports, boolean cluster, SeckillClient.Builder options, String user,
                         String password) {
        return switch (this) {
            case JEDIS_RESP2, JEDIS_RESP3 -> jedis(ports, cluster, options, user, password);
            default -> lettuce(ports, cluster, options, user, password);
        };
    }

    private Conn jedis(List<Integer> ports, boolean cluster, SeckillClient.Builder options, String user,
                       String password) {
        DefaultJedisClientConfig config = DefaultJedisClientConfig.builder()
                .protocol(this == JEDIS_RESP3 ? RedisProtocol.RESP3 : RedisProtocol.RESP2).timeoutMillis(10_000)
                .user(user).password(password).build();
        if (cluster) {
            Set<HostAndPort> nodes = ports.stream().map(p -> new HostAndPort("127.0.0.1", p)).collect(Collectors.toSet());
            JedisCluster j = new JedisCluster(nodes, config);
            return new Conn(options.transport(new JedisTransport(j)).build(), j, this);
        }
        JedisPooled j = new JedisPooled(new HostAndPort("127.0.0.1", ports.get(0)), config);
        return new Conn(options.transport(new JedisTransport(j)).build(), j, this);
    }

    private Conn lettuce(List<Integer> ports, boolean cluster, SeckillClient.Builder options, String user,
                         String password) {
        ProtocolVersion v = this == LETTUCE_SYNC_RESP2 ? ProtocolVersion.RESP2 : ProtocolVersion.RESP3;
        if (cluster) {
            List<RedisURI> uris = ports.stream().map(p -> uri(p, user, password)).toList();
            RedisClusterClient c = RedisClusterClient.create(uris);
            c.setOptions(ClusterClientOptions.builder().protocolVersion(v).build());
            StatefulRedisClusterConnection<String, String> conn = c.connect(StringCodec.UTF8);
            return new Conn(options.transport(LettuceTransport.of(conn)).build(), () -> {
                conn.close();
                c.shutdown(0, 2, TimeUnit.SECONDS);
            }, this);
        }
        RedisClient c = RedisClient.create(uri(ports.get(0), user, password));
        c.setOptions(ClientOptions.builder().protocolVersion(v).build());
        StatefulRedisConnection<String, String> conn = c.connect(StringCodec.UTF8);
        return new Conn(options.transport(LettuceTransport.of(conn)).build(), () -> {
            conn.close();
            c.shutdown(0, 2, TimeUnit.SECONDS);
        }, this);
    }

    private static RedisURI uri(int port, String user, String password) {
        RedisURI.Builder b = RedisURI.builder().withHost("127.0.0.1").withPort(port).withTimeout(Duration.ofSeconds(10));
        if (user != null) {
            b.withAuthentication(user, password.toCharArray());
        }
        return b.build();
    }

    /** Sale and AsyncSale behind one interface (the async one waits at most 30 s a call). */
    interface Api {
        boolean init(long total, InitOptions o);

        Reserved reserve(String user, long qty, String reqid);

        Settled release(String rid);

        Settled confirm(String rid);

        Report info();

        Reservation get(String rid);

        UnfenceStatus unfence();

        Entered enter(String user, long qty, String reqid);

        Drawn draw(int count);

        EntrantsPage entrants(String cursor, int count);

        ReconcileResult reconcile(Iterable<Order> orders, boolean apply, boolean expire, int chunk);

        record Sync(Sale s) implements Api {
            public boolean init(long total, InitOptions o) { return s.init(total, o); }
            public Reserved reserve(String user, long qty, String reqid) { return s.reserve(user, qty, reqid); }
            public Settled release(String rid) { return s.release(rid); }
            public Settled confirm(String rid) { return s.confirm(rid); }
            public Report info() { return s.info(); }
            public Reservation get(String rid) { return s.get(rid); }
            public UnfenceStatus unfence() { return s.unfence(); }
            public Entered enter(String user, long qty, String reqid) { return s.enter(user, qty, reqid); }
            public Drawn draw(int count) { return s.draw(count); }
            public EntrantsPage entrants(String cursor, int count) { return s.entrants(cursor, count); }
            public ReconcileResult reconcile(Iterable<Order> o, boolean apply, boolean expire, int chunk) {
                return s.reconcile(o, apply, expire, chunk);
            }
        }

        record Async(AsyncSale s) implements Api {
            static <T> T await(CompletableFuture<T> f) {
                try {
                    return f.get(30, TimeUnit.SECONDS);
                } catch (java.util.concurrent.ExecutionException e) {
                    Throwable c = SeckillClient.unwrap(e);
                    throw c instanceof RuntimeException r ? r : new IllegalStateException(c);
                } catch (Exception e) {
                    throw new IllegalStateException(e);
                }
            }

            public boolean init(long total, InitOptions o) { return await(s.init(total, o)); }
            public Reserved reserve(String user, long qty, String reqid) { return await(s.reserve(user, qty, reqid)); }
            public Settled release(String rid) { return await(s.release(rid)); }
            public Settled confirm(String rid) { return await(s.confirm(rid)); }
            public Report info() { return await(s.info()); }
            public Reservation get(String rid) { return await(s.get(rid)); }
            public UnfenceStatus unfence() { return await(s.unfence()); }
            public Entered enter(String user, long qty, String reqid) { return await(s.enter(user, qty, reqid)); }
            public Drawn draw(int count) { return await(s.draw(count)); }
            public EntrantsPage entrants(String cursor, int count) { return await(s.entrants(cursor, count)); }
            public ReconcileResult reconcile(Iterable<Order> o, boolean apply, boolean expire, int chunk) {
                return await(s.reconcile(o, apply, expire, chunk));
            }
        }
    }
}
