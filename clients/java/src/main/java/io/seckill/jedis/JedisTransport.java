package io.seckill.jedis;

import io.seckill.CommandException;
import io.seckill.Transport;
import io.seckill.Wire;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import redis.clients.jedis.UnifiedJedis;
import redis.clients.jedis.commands.ProtocolCommand;
import redis.clients.jedis.exceptions.JedisDataException;
import redis.clients.jedis.util.KeyValue;

/**
 * SECKILL over Jedis: {@code JedisPooled} (one server) or {@code JedisCluster}, both
 * {@link UnifiedJedis}. Every call is {@code sendCommand(sampleKey, cmd, args...)}: the
 * sample key picks the cluster node and is not sent, so the arguments carry the key again.
 * Jedis raises TRYAGAIN at once; {@link io.seckill.SeckillClient} retries it.
 */
public final class JedisTransport implements Transport {
    private final UnifiedJedis jedis;

    public JedisTransport(UnifiedJedis jedis) {
        this.jedis = jedis;
    }

    @Override
    public Object call(Wire wire) {
        ProtocolCommand cmd = command(wire.name());
        String[] args = wire.args().toArray(String[]::new);
        String key = wire.routingKey();
        try {
            return plain(key == null ? jedis.sendCommand(cmd, args) : jedis.sendCommand(key, cmd, args));
        } catch (JedisDataException e) {
            throw new CommandException(e.getMessage(), e);
        }
    }

    private static ProtocolCommand command(String name) {
        byte[] raw = name.getBytes(StandardCharsets.US_ASCII);
        return () -> raw;
    }

    /** Jedis's reply (byte[], Long, List, RESP3 KeyValue lists and maps) as plain values. */
    public static Object plain(Object r) {
        if (r instanceof byte[] b) {
            return new String(b, StandardCharsets.UTF_8);
        }
        if (r instanceof List<?> l) {
            List<Object> out = new ArrayList<>(l.size());
            for (Object e : l) {
                if (e instanceof KeyValue<?, ?> kv) {
                    out.add(plain(kv.getKey()));
                    out.add(plain(kv.getValue()));
                } else {
                    out.add(plain(e));
                }
            }
            return out;
        }
        if (r instanceof Map<?, ?> m) {
            List<Object> out = new ArrayList<>(m.size() * 2);
            m.forEach((k, v) -> {
                out.add(plain(k));
                out.add(plain(v));
            });
            return out;
        }
        return r;
    }
}
