package io.seckill;

import java.util.ArrayList;
import java.util.List;

/**
 * SECKILL.INIT's options (docs/commands.md gives the ranges; the server checks them and
 * names the bad argument). {@code new InitOptions().limit(2).holdMs(900_000).fence()}.
 */
public final class InitOptions {
    private final List<String> words = new ArrayList<>();
    private boolean draw;
    private boolean fence;
    private boolean replace;
    private boolean stream;
    private boolean end;
    private String beacon;

    private InitOptions put(String name, Object value) {
        words.add(name);
        words.add(String.valueOf(value));
        return this;
    }

    public InitOptions shards(int n) {
        return put("SHARDS", n);
    }

    public InitOptions limit(long q) {
        return put("LIMIT", q);
    }

    public InitOptions holdMs(long ms) {
        return put("HOLD", ms);
    }

    public InitOptions startMs(long unixMs) {
        return put("START", unixMs);
    }

    public InitOptions endMs(long unixMs) {
        end = true;
        return put("END", unixMs);
    }

    public InitOptions ttlSeconds(long s) {
        return put("TTL", s);
    }

    /** The reservation stream; it must hash to the sale's slot ({@code sale:{1001}:events}). */
    public InitOptions stream(String key) {
        stream = true;
        return put("STREAM", key);
    }

    public InitOptions maxlen(long n) {
        if (!stream) {
            throw new IllegalArgumentException("maxlen needs a stream");
        }
        return put("MAXLEN", n);
    }

    /** A draw sale (docs/draw-sales.md); it needs {@link #endMs}. */
    public InitOptions draw() {
        draw = true;
        return this;
    }

    /**
     * A draw sale's declared beacon ({@code DRAW BEACON name}, 1 to 256 bytes): the name of
     * the public randomness value the shop promises to give the first DRAW
     * ({@link Sale#draw(int, String)}), e.g. {@code "drand quicknet round 1234567"}. Only with
     * {@link #draw()} (docs/draw-sales.md).
     */
    public InitOptions beacon(String name) {
        beacon = Protocol.checkBeacon(name, Protocol.MAX_BEACON_NAME, "BEACON name");
        return this;
    }

    /** Refuse to sell after a failover or restart until reconciled and unfenced. */
    public InitOptions fence() {
        fence = true;
        return this;
    }

    /** Start a new round on an existing sale. */
    public InitOptions replace() {
        replace = true;
        return this;
    }

    /** The words after {@code key total}. */
    public List<String> args() {
        if (draw && !end) {
            throw new IllegalArgumentException("a draw sale needs endMs: the end of registration");
        }
        if (beacon != null && !draw) {
            throw new IllegalArgumentException("a beacon needs a draw sale (draw())");
        }
        List<String> out = new ArrayList<>(words);
        if (draw) {
            out.add("DRAW");
            if (beacon != null) {
                out.add("BEACON");
                out.add(beacon);
            }
        }
        if (fence) {
            out.add("FENCE");
        }
        if (replace) {
            out.add("REPLACE");
        }
        return out;
    }
}
