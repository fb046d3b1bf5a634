package io.seckill;

import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;

/**
 * Sends one {@link Wire} and hands back the reply as plain values: {@code String} (simple
 * and bulk strings, UTF-8), {@code Long}, {@code List<Object>}, null. An error reply is a
 * {@link CommandException} with the server's text; a connection failure is the driver's own
 * exception. A cluster transport routes by {@link Wire#key()}.
 */
public interface Transport {
    Object call(Wire wire);

    /** The same call, not blocking the caller. The default runs {@link #call} in the caller. */
    default CompletionStage<Object> callAsync(Wire wire) {
        CompletableFuture<Object> f = new CompletableFuture<>();
        try {
            f.complete(call(wire));
        } catch (RuntimeException e) {
            f.completeExceptionally(e);
        }
        return f;
    }
}
