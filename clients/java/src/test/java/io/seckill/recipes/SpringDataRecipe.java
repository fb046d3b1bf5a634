package io.seckill.recipes;

import io.lettuce.core.codec.ByteArrayCodec;
import io.lettuce.core.output.NestedMultiOutput;
import java.nio.charset.StandardCharsets;
import java.util.List;
import org.springframework.data.redis.connection.RedisClusterConnection;
import org.springframework.data.redis.connection.RedisConnectionFactory;
import org.springframework.data.redis.connection.lettuce.LettuceConnection;

/**
 * docs/clients.md's Spring Data Redis 3.x recipe, as the page shows it between the markers
 * (RecipesTest checks that): the variables it uses are the parameters, what it computes the
 * result. ClusterTest runs it on a LettuceConnectionFactory against its cluster.
 */
public final class SpringDataRecipe {
    /** INFO's FORMAT JSON report and RESERVE's reply, as the recipe got them. */
    public record Replies(byte[] json, List<Object> reserve) {
    }

    private SpringDataRecipe() {
    }

    public static Replies run(RedisConnectionFactory connectionFactory, String key, String user, String reqid) {
        // docs/clients.md begin
        RedisClusterConnection conn = connectionFactory.getClusterConnection();
        byte[] k = key.getBytes(StandardCharsets.UTF_8);

        byte[] json = conn.execute("SECKILL.INFO", k,
                List.of("FORMAT".getBytes(StandardCharsets.UTF_8), "JSON".getBytes(StandardCharsets.UTF_8)));

        // Lettuce underneath: name the output; the status and the id arrive as byte[], remaining as Long
        @SuppressWarnings("unchecked")
        List<Object> r = (List<Object>) ((LettuceConnection) conn).execute("SECKILL.RESERVE",
                new NestedMultiOutput<>(ByteArrayCodec.INSTANCE),
                k, user.getBytes(StandardCharsets.UTF_8), "REQID".getBytes(StandardCharsets.UTF_8),
                reqid.getBytes(StandardCharsets.UTF_8));
        // docs/clients.md end
        conn.close();   // the page leaves the connection to its caller
        return new Replies(json, r);
    }
}
