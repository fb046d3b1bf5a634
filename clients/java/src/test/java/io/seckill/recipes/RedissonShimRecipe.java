package io.seckill.recipes;

import java.util.Collections;
import java.util.List;
import org.redisson.api.RScript;
import org.redisson.api.RedissonClient;
import org.redisson.client.codec.StringCodec;

/**
 * docs/clients.md's Redisson recipe for the module backend (a Lua shim routed by its key), as
 * the page shows it between the markers (RecipesTest checks that): the variables it uses are
 * the parameters, RESERVE's reply the result. RedissonTest runs it against a server with the
 * module.
 */
public final class RedissonShimRecipe {
    private RedissonShimRecipe() {
    }

    public static List<Object> reserve(RedissonClient redisson, String key, String user, String reqid) {
        // docs/clients.md begin
        RScript script = redisson.getScript(StringCodec.INSTANCE);
        String reserve = "return redis.pcall('SECKILL.RESERVE', KEYS[1], unpack(ARGV))";
        List<Object> r = script.eval(key, RScript.Mode.READ_WRITE, reserve, RScript.ReturnType.MULTI,
                Collections.singletonList(key), user, "REQID", reqid);
        // docs/clients.md end
        return r;
    }
}
