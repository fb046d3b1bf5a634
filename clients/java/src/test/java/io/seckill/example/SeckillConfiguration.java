package io.seckill.example;

import io.seckill.SeckillClient;
import io.seckill.SoldOutFlags;
import io.seckill.jedis.JedisTransport;
import java.util.Set;
import redis.clients.jedis.HostAndPort;
import redis.clients.jedis.JedisCluster;
import redis.clients.jedis.JedisPooled;
import redis.clients.jedis.UnifiedJedis;

/**
 * The bean wiring of a Spring Boot service, as a plain class: in a Spring application it is
 * {@code @Configuration}, each method {@code @Bean}, and the addresses come from
 * {@code application.yml} ({@code seckill.redis.nodes}). Spring itself is left out of this
 * project to keep the build small; nothing here depends on it.
 *
 * <pre>{@code
 * @Configuration
 * class SeckillConfiguration {
 *     @Bean(destroyMethod = "close") UnifiedJedis jedis(@Value("${seckill.redis.nodes}") List<String> nodes) { ... }
 *     @Bean SeckillClient seckillClient(UnifiedJedis jedis) { ... }
 *     @Bean CheckoutService checkoutService(SeckillClient client) { ... }
 * }
 * }</pre>
 */
public final class SeckillConfiguration {
    /** One connection pool per application: JedisCluster for a cluster, JedisPooled for one server. */
    public UnifiedJedis jedis(Set<HostAndPort> nodes, boolean cluster) {
        return cluster ? new JedisCluster(nodes) : new JedisPooled(nodes.iterator().next());
    }

    /** One SeckillClient per pool: it detects the backend once and keeps the sold-out flags. */
    public SeckillClient seckillClient(UnifiedJedis jedis) {
        return SeckillClient.builder(new JedisTransport(jedis))
                .localSoldOut(new SoldOutFlags())
                .build();
    }

    public CheckoutService checkoutService(SeckillClient client) {
        return new CheckoutService(client);
    }
}
