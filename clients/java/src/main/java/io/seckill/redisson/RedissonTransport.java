package io.seckill.redisson;

import io.seckill.CommandException;
import io.seckill.Transport;
import io.seckill.Wire;
import java.util.ArrayList;
import java.util.List;
import org.redisson.api.FunctionMode;
import org.redisson.api.FunctionResult;
import org.redisson.api.RFunction;
import org.redisson.api.RedissonClient;
import org.redisson.client.RedisException;
import org.redisson.client.codec.StringCodec;

/**
 * SECKILL over Redisson, the Functions backend only: Redisson has no public API for a
 * module's command, but calls Functions ({@link RFunction}), routing a cluster call by the
 * declared key. Build the client with {@code .backend(Backend.FUNCTIONS)}; a command that
 * is not an FCALL (SECKILL.INFO for detection, the module's own commands) is refused.
 * Redisson retries TRYAGAIN itself (retryAttempts, retryDelay) before the client does.
 */
public final class RedissonTransport implements Transport {
    private final RFunction functions;

    public RedissonTransport(RedissonClient redisson) {
        this.functions = redisson.getFunction(StringCodec.INSTANCE);
    }

    @Override
    public Object call(Wire wire) {
        boolean ro = wire.name().equals("FCALL_RO");
        if (!ro && !wire.name().equals("FCALL")) {
            throw new UnsupportedOperationException("Redisson sends FCALL only (the Functions backend), not "
                    + wire.name());
        }
        List<String> w = wire.words();
        int numkeys = Integer.parseInt(w.get(2));
        List<Object> keys = new ArrayList<>(w.subList(3, 3 + numkeys));
        Object[] values = w.subList(3 + numkeys, w.size()).toArray();
        FunctionResult result = switch (wire.reply()) {
            case ARRAY -> FunctionResult.LIST;
            case STATUS, BULK -> FunctionResult.STRING;
        };
        try {
            return functions.call(ro ? FunctionMode.READ : FunctionMode.WRITE, w.get(1), result, keys, values);
        } catch (RedisException e) {
            throw new CommandException(serverText(e.getMessage()), e);
        }
    }

    /** Redisson appends ". channel: ... command: ..." to the server's text. */
    static String serverText(String m) {
        if (m == null) {
            return null;
        }
        int i = m.indexOf(". channel: ");
        return i < 0 ? m : m.substring(0, i);
    }
}
