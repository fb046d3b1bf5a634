package io.seckill.lettuce;

import io.lettuce.core.RedisCommandExecutionException;
import io.lettuce.core.api.StatefulRedisConnection;
import io.lettuce.core.api.async.BaseRedisAsyncCommands;
import io.lettuce.core.api.sync.BaseRedisCommands;
import io.lettuce.core.cluster.api.StatefulRedisClusterConnection;
import io.lettuce.core.codec.StringCodec;
import io.lettuce.core.output.CommandOutput;
import io.lettuce.core.output.NestedMultiOutput;
import io.lettuce.core.output.StatusOutput;
import io.lettuce.core.output.ValueOutput;
import io.lettuce.core.protocol.CommandArgs;
import io.lettuce.core.protocol.ProtocolKeyword;
import io.seckill.CommandException;
import io.seckill.Transport;
import io.seckill.Wire;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.CompletionStage;

/**
 * SECKILL over Lettuce, one server or a cluster, sync and async. Every call is
 * {@code dispatch(cmd, output, args)} with the key added by {@code addKey}: the cluster
 * connection routes by the first key argument (an argument added with {@code add} goes to
 * the default node). Arrays decode with {@code NestedMultiOutput}; reports come as FORMAT
 * JSON through {@code ValueOutput}, never through Lettuce's map outputs (they mis-decode the
 * nested {@code shards} array). Lettuce raises TRYAGAIN at once; the client retries it.
 */
public final class LettuceTransport implements Transport {
    private static final StringCodec CODEC = StringCodec.UTF8;

    private final BaseRedisCommands<String, String> sync;
    private final BaseRedisAsyncCommands<String, String> async;

    private LettuceTransport(BaseRedisCommands<String, String> sync, BaseRedisAsyncCommands<String, String> async) {
        this.sync = sync;
        this.async = async;
    }

    public static LettuceTransport of(StatefulRedisConnection<String, String> connection) {
        return new LettuceTransport(connection.sync(), connection.async());
    }

    public static LettuceTransport of(StatefulRedisClusterConnection<String, String> connection) {
        return new LettuceTransport(connection.sync(), connection.async());
    }

    @Override
    public Object call(Wire wire) {
        try {
            return sync.dispatch(keyword(wire.name()), output(wire.reply()), args(wire));
        } catch (RedisCommandExecutionException e) {
            throw new CommandException(e.getMessage(), e);
        }
    }

    @Override
    public CompletionStage<Object> callAsync(Wire wire) {
        CompletableFuture<Object> out = new CompletableFuture<>();
        async.dispatch(keyword(wire.name()), output(wire.reply()), args(wire)).whenComplete((r, err) -> {
            Throwable e = err instanceof CompletionException && err.getCause() != null ? err.getCause() : err;
            if (e == null) {
                out.complete(r);
            } else if (e instanceof RedisCommandExecutionException) {
                out.completeExceptionally(new CommandException(e.getMessage(), e));
            } else {
                out.completeExceptionally(e);
            }
        });
        return out;
    }

    private static CommandArgs<String, String> args(Wire wire) {
        CommandArgs<String, String> args = new CommandArgs<>(CODEC);
        List<String> words = wire.words();
        for (int i = 1; i < words.size(); i++) {
            if (i == wire.keyIndex()) {
                args.addKey(words.get(i));
            } else {
                args.add(words.get(i));
            }
        }
        return args;
    }

    @SuppressWarnings("unchecked")
    private static CommandOutput<String, String, Object> output(Wire.Reply reply) {
        CommandOutput<String, String, ?> out = switch (reply) {
            case STATUS -> new StatusOutput<>(CODEC);
            case ARRAY -> new NestedMultiOutput<>(CODEC);
            case BULK -> new ValueOutput<>(CODEC);
        };
        return (CommandOutput<String, String, Object>) out;
    }

    private static ProtocolKeyword keyword(String name) {
        byte[] bytes = name.getBytes(StandardCharsets.US_ASCII);
        return new ProtocolKeyword() {
            @Override
            public byte[] getBytes() {
                return bytes;
            }

            @Override
            public String toString() {
                return name;
            }
        };
    }
}
