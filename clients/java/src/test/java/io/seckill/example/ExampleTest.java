package io.seckill.example;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.seckill.RedisServers;
import io.seckill.SeckillClient;
import java.util.Set;
import org.junit.jupiter.api.Test;
import redis.clients.jedis.HostAndPort;
import redis.clients.jedis.UnifiedJedis;

/** The example wired as its configuration wires it, run against a server with the module. */
class ExampleTest {
    @Test
    void theCheckoutRunsAsWired() throws Exception {
        try (RedisServers servers = new RedisServers()) {
            int port = servers.startWithModule().port;
            SeckillConfiguration config = new SeckillConfiguration();
            try (UnifiedJedis jedis = config.jedis(Set.of(new HostAndPort("127.0.0.1", port)), false)) {
                SeckillClient client = config.seckillClient(jedis);
                CheckoutService checkout = config.checkoutService(client);

                assertTrue(checkout.openSale(1001, 2, 1, 900_000));
                CheckoutService.Attempt a = checkout.tryReserve(1001, "user:41", "order-7f39");
                assertEquals(new CheckoutService.Attempt(true, "order-7f39", 1, null), a);
                assertEquals(a, checkout.tryReserve(1001, "user:41", "order-7f39"), "a retry lands on the same order");
                assertEquals("you already hold order-7f39", checkout.tryReserve(1001, "user:41", "order-80aa").reason());
                assertTrue(checkout.tryReserve(1001, "user:42", "order-7f3a").reserved());
                CheckoutService.Attempt late = checkout.tryReserve(1001, "user:43", "order-7f3b");
                assertFalse(late.reserved());
                assertEquals("SOLD_OUT", late.reason());
                assertTrue(checkout.paid(1001, "order-7f39"));
                assertEquals(1, checkout.cancelled(1001, "order-7f3a"));
                // the RELEASE's reply showed a unit back: the local sold-out flag is cleared at once
                assertTrue(checkout.tryReserve(1001, "user:43", "order-7f3c").reserved());
                assertTrue(client.sale("sale:{1001}").info().invariantOk());
            }
        }
    }
}
