package io.seckill;

import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
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
    /** The library's keys per sale key, as seckill_keys listed them ({@link LibraryKeys}). */
    private final Map<String, List<String>> keys = new ConcurrentHashMap<>();

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

        /**
         * The backend to use; without it the first call asks the server ({@code SECKILL.INFO}
         * without a key, then {@code FCALL_RO seckill_version 1 key}; {@link SeckillClient#backend}).
         */
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
     * {@code sampleKey}, with no right beyond what the roles of docs/operations.md have (no
     * MODULE LIST, no FUNCTION LIST): {@code SECKILL.INFO} without a key is the module when
     * the server knows the command (it answers its arity error to any user: Redis checks the
     * arity before the ACL; NOPERM, from a server that checks the ACL first, also means the
     * command exists, and the user may still be allowed RESERVE and the rest), else
     * {@code FCALL_RO seckill_version 1 sampleKey} is the library when it answers a version.
     * {@link BackendException} when neither, or when the ACL refuses FCALL_RO (NOPERM: there
     * the library's presence cannot be told; the message names the right to add).
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

    static final String NO_BACKEND = "neither the seckill module (SECKILL.INFO is an unknown command) nor the "
            + "seckill Functions library (FCALL_RO seckill_version 1 key) is on this server: load the module, or "
            + "FUNCTION LOAD functions/seckill.lua (docs/managed-redis.md)";

    private Backend detect(String key) {
        try {
            transport.call(Wire.keyless(key, Wire.Reply.ARRAY, "SECKILL.INFO"));
            return Backend.MODULE;   // a value: only the module has the command
        } catch (CommandException e) {
            if (moduleAnswered(e)) {
                return Backend.MODULE;
            }
        }
        Object version;
        try {
            version = transport.call(LibraryKeys.versionWire(key));
        } catch (CommandException e) {
            if ("NOPERM".equals(e.code())) {
                throw new BackendException("the seckill module is not on this server, and this ACL user may not "
                        + "run FCALL_RO (" + e.getMessage() + "): give it +fcall +fcall_ro, as the library's "
                        + "role lines of docs/operations.md do, and key patterns that match the sale key", e);
            }
            throw new BackendException(NO_BACKEND, e);
        }
        if (!(version instanceof String v) || !v.strip().matches("[0-9]+(\\.[0-9]+)*")) {
            throw new BackendException("FCALL_RO seckill_version answered " + Protocol.show(version)
                    + ", not a version: load functions/seckill.lua again (FUNCTION LOAD REPLACE)");
        }
        return Backend.FUNCTIONS;
    }

    /**
     * Whether SECKILL.INFO's error reply comes from the module: its arity error, or NOPERM
     * (only a known command gets it: Redis looks the command up before it checks the ACL).
     * "unknown command" (and a proxy's refusal) is not.
     */
    static boolean moduleAnswered(CommandException e) {
        if ("NOPERM".equals(e.code())) {
            return true;
        }
        String m = e.getMessage() == null ? "" : e.getMessage().toLowerCase(java.util.Locale.ROOT);
        return m.contains("wrong number of arguments");
    }

    // ------------------------------------------------------------ calls

    /**
     * One command on the sale at {@code key}. On the library it declares its keys
     * ({@link LibraryKeys}: INIT's from its arguments, plus with REPLACE those the sale being
     * replaced lists and a draw sale's four; none for INFO and GET; for the rest the list
     * seckill_keys gave, kept per key, and for DRAW {@code <key>:secret} besides); a call refused as undeclared (the sale was replaced since the list was asked: nothing
     * changed) goes once more with the list asked again, and a second refusal is thrown.
     */
    <T> T run(String key, Op<T> op) {
        Backend b = backend(key);
        for (int refused = 0; ; refused++) {
            Wire w = b.wire(op.sub(), key, b == Backend.FUNCTIONS ? declared(key, op) : List.of(), op.args(), op.reply());
            try {
                Object reply = call(w);
                settled(key, op, null);
                return op.parse().apply(reply);
            } catch (CommandException e) {
                if (!settled(key, op, e) || refused > 0) {
                    throw e;
                }
            }
        }
    }

    <T> CompletableFuture<T> runAsync(String key, Op<T> op) {
        Backend b = backend(key);
        if (b != Backend.FUNCTIONS) {
            return attempt(b.wire(op.sub(), key, op.args(), op.reply()), 1).thenApply(op.parse());
        }
        return libraryAsync(key, op, 0).thenApply(op.parse());
    }

    private CompletableFuture<Object> libraryAsync(String key, Op<?> op, int refused) {
        return declaredAsync(key, op)
                .thenCompose(k -> attempt(Backend.FUNCTIONS.wire(op.sub(), key, k, op.args(), op.reply()), 1))
                .handle((r, err) -> {
                    Throwable e = unwrap(err);
                    if (settled(key, op, e) && refused == 0) {
                        return libraryAsync(key, op, 1);
                    }
                    return e == null ? CompletableFuture.completedFuture(r) : CompletableFuture.<Object>failedFuture(e);
                })
                .thenCompose(f -> f);
    }

    /**
     * After a library call: forgets the sale's list after an INIT (asked again at its next use)
     * or a refusal as undeclared; true for the refusal (the call may go again).
     */
    private boolean settled(String key, Op<?> op, Throwable error) {
        boolean refused = LibraryKeys.undeclared(error);
        if (refused || op.sub().equals("INIT")) {
            keys.remove(key);
        }
        return refused;
    }

    /** The keys, after the sale key, the library call {@code op} on {@code key} declares. */
    private List<String> declared(String key, Op<?> op) {
        try {
            return declaredAsync(key, op).join();
        } catch (CompletionException e) {
            if (unwrap(e) instanceof RuntimeException r) {
                throw r;
            }
            throw e;
        }
    }

    private CompletableFuture<List<String>> declaredAsync(String key, Op<?> op) {
        if (LibraryKeys.SALE_KEY_ONLY.contains(op.sub())) {
            return CompletableFuture.completedFuture(List.of());
        }
        if (op.sub().equals("INIT")) {
            LibraryKeys.InitKeys own = LibraryKeys.initKeys(key, op.args());
            return own.replace()
                    ? listed(key).thenApply(old -> LibraryKeys.merged(own.keys(), old, LibraryKeys.replacedKeys(key, old)))
                    : CompletableFuture.completedFuture(own.keys());
        }
        List<String> known = keys.get(key);
        if (known != null) {
            return CompletableFuture.completedFuture(LibraryKeys.forCall(op.sub(), key, known));
        }
        return listed(key).thenApply(k -> {
            keys.put(key, k);
            return LibraryKeys.forCall(op.sub(), key, k);
        });
    }

    /** {@code FCALL_RO seckill_keys 1 key}, TRYAGAIN retried. */
    private CompletableFuture<List<String>> listed(String key) {
        return attempt(LibraryKeys.keysWire(key), 1).thenApply(LibraryKeys::parseKeys);
    }

    /** One wire, TRYAGAIN retried within the policy. */
    private Object call(Wire w) {
        for (int attempt = 1; ; attempt++) {
            try {
                return transport.call(w);
            } catch (CommandException e) {
                if (!e.retryable() || attempt >= retry.attempts()) {
                    throw e;
                }
                tryAgainRetries.increment();
                sleep(retry.delayMs(attempt, random), e);
            }
        }
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
