package io.seckill;

import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.LongAdder;
import java.util.random.RandomGenerator;

/**
 * One connection (pool or cluster client) that speaks SECKILL: the backend it uses (given,
 * or detected once on the first call), the TRYAGAIN retry, the local sold-out flags.
 * Thread-safe; make one per application and take {@link #sale} handles from it.
 *
 * <pre>{@code
 * SeckillClient client = SeckillClient.builder(new JedisTransport(new JedisPooled("10.0.0.1", 6379))).build();
 * Reserved r = client.sale("sale:{1001}").reserve("user:42", 1, "order-7f3a");
 * }</pre>
 */
public final class SeckillClient {
    private final Transport transport;
    private final RetryPolicy retry;
    private final SoldOutFlags soldOut;
    private final RandomGenerator random = RandomGenerator.getDefault();
    private final LongAdder tryAgainRetries = new LongAdder();
    private volatile Backend backend;

    private SeckillClient(Builder b) {
        this.transport = b.transport;
        this.retry = b.retry;
        this.soldOut = b.soldOut;
        this.backend = b.backend;
    }

    public static Builder builder(Transport transport) {
        return new Builder().transport(transport);
    }

    /** A builder without a transport yet: give it one with {@link Builder#transport}. */
    public static Builder builder() {
        return new Builder();
    }

    public static final class Builder {
        private Transport transport;
        private RetryPolicy retry = RetryPolicy.DEFAULT;
        private SoldOutFlags soldOut;
        private Backend backend;

        private Builder() {}

        /** The connection: a {@code JedisTransport} or {@code LettuceTransport}, or your own. */
        public Builder transport(Transport t) {
            this.transport = java.util.Objects.requireNonNull(t);
            return this;
        }

        /** The backend to use; without it the first call asks the server (MODULE LIST, FUNCTION LIST). */
        public Builder backend(Backend b) {
            this.backend = b;
            return this;
        }

        public Builder retry(RetryPolicy r) {
            this.retry = r;
            return this;
        }

        /** Keep a local sold-out flag per sale (off by default); share one across clients if you like. */
        public Builder localSoldOut(SoldOutFlags flags) {
            this.soldOut = flags;
            return this;
        }

        public SeckillClient build() {
            if (transport == null) {
                throw new IllegalStateException("a SeckillClient needs a transport");
            }
            return new SeckillClient(this);
        }
    }

    public Sale sale(String key) {
        return new Sale(this, Protocol.checkKey(key));
    }

    /** The same sale with futures; the backend is settled (detected if need be) here, once. */
    public AsyncSale asyncSale(String key) {
        backend(key);
        return new AsyncSale(this, Protocol.checkKey(key));
    }

    /** The local sold-out flags, or null when off. */
    public SoldOutFlags soldOutFlags() {
        return soldOut;
    }

    /** How many TRYAGAIN replies (and the library's non-local-key form of it) were retried so far. */
    public long tryAgainRetries() {
        return tryAgainRetries.sum();
    }

    Transport transport() {
        return transport;
    }

    /**
     * The backend, detected on the first call by asking the node that serves
     * {@code sampleKey}: the module when MODULE LIST names it, else the library when FUNCTION
     * LIST holds it and it answers seckill_version; {@link BackendException} when neither.
     */
    public Backend backend(String sampleKey) {
        Backend b = backend;
        if (b == null) {
            synchronized (this) {
                if (backend == null) {
                    backend = detect(sampleKey);
                }
                b = backend;
            }
        }
        return b;
    }

    private Backend detect(String key) {
        Object modules = maybe(Wire.keyless(key, Wire.Reply.ARRAY, "MODULE", "LIST"));
        if (named(modules, "name", "seckill")) {
            return Backend.MODULE;
        }
        Object libs = maybe(Wire.keyless(key, Wire.Reply.ARRAY, "FUNCTION", "LIST", "LIBRARYNAME", "seckill"));
        if (named(libs, "library_name", "seckill")) {
            if (maybe(Wire.keyless(key, Wire.Reply.BULK, "FCALL_RO", "seckill_version", "0")) == null) {
                throw new BackendException("the seckill library is loaded but does not answer seckill_version: "
                        + "load functions/seckill.lua again");
            }
            return Backend.FUNCTIONS;
        }
        throw new BackendException("neither the seckill module (MODULE LIST) nor the seckill Functions library "
                + "(FUNCTION LIST) is on this server: load the module, or FUNCTION LOAD functions/seckill.lua "
                + "(docs/managed-redis.md)");
    }

    /** The reply, or null when the server refused the command (managed services refuse MODULE LIST). */
    private Object maybe(Wire w) {
        try {
            return transport.call(w);
        } catch (CommandException e) {
            return null;
        }
    }

    private static boolean named(Object listReply, String field, String name) {
        if (!(listReply instanceof List<?> entries)) {
            return false;
        }
        for (Object e : entries) {
            Map<String, Object> p = e instanceof List<?> || e instanceof Map<?, ?> ? Protocol.pairs(e) : Map.of();
            if (name.equals(p.get(field))) {
                return true;
            }
        }
        return false;
    }

    // ------------------------------------------------------------ calls

    <T> T run(String key, Op<T> op) {
        Wire w = backend(key).wire(op.sub(), key, op.args(), op.reply());
        for (int attempt = 1; ; attempt++) {
            try {
                return op.parse().apply(transport.call(w));
            } catch (CommandException e) {
                if (!e.retryable() || attempt >= retry.attempts()) {
                    throw e;
                }
                tryAgainRetries.increment();
                sleep(retry.delayMs(attempt, random), e);
            }
        }
    }

    <T> CompletableFuture<T> runAsync(String key, Op<T> op) {
        Wire w = backend(key).wire(op.sub(), key, op.args(), op.reply());
        return attempt(w, 1).thenApply(op.parse());
    }

    private CompletableFuture<Object> attempt(Wire w, int n) {
        CompletableFuture<Object> out = new CompletableFuture<>();
        transport.callAsync(w).whenComplete((r, err) -> {
            Throwable e = unwrap(err);
            if (e == null) {
                out.complete(r);
            } else if (e instanceof CommandException ce && ce.retryable() && n < retry.attempts()) {
                tryAgainRetries.increment();
                CompletableFuture.delayedExecutor(retry.delayMs(n, random), TimeUnit.MILLISECONDS)
                        .execute(() -> attempt(w, n + 1).whenComplete((r2, e2) -> {
                            if (e2 == null) {
                                out.complete(r2);
                            } else {
                                out.completeExceptionally(unwrap(e2));
                            }
                        }));
            } else {
                out.completeExceptionally(e);
            }
        });
        return out;
    }

    static Throwable unwrap(Throwable e) {
        while ((e instanceof CompletionException || e instanceof ExecutionException) && e.getCause() != null) {
            e = e.getCause();
        }
        return e;
    }

    private static void sleep(long ms, CommandException cause) {
        try {
            Thread.sleep(ms);
        } catch (InterruptedException ie) {
            Thread.currentThread().interrupt();
            throw cause;
        }
    }
}
