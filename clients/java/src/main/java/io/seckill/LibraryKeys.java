package io.seckill;

import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Locale;
import java.util.Set;

/**
 * The keys a call of the Functions library declares (docs/managed-redis.md, "Calling it"), as
 * plain functions: INIT's from its own arguments, the list {@code FCALL_RO seckill_keys 1 key}
 * answers for every other function (none for INFO and GET), and the refusal
 * {@code ERR undeclared key ...} after which a client asks the list again and retries once.
 */
final class LibraryKeys {
    private LibraryKeys() {}

    /** The key {@code seckill_version} is called with when no sale key is at hand (it only routes). */
    static final String PROBE_KEY = "seckill:probe";

    /** Functions that touch the sale key alone: called without the list. */
    static final Set<String> SALE_KEY_ONLY = Set.of("INFO", "GET");

    private static final Set<String> ONE_VALUE = Set.of("SHARDS", "LIMIT", "HOLD", "START", "END", "TTL", "BEACON");

    /** The keys INIT's arguments name, and whether REPLACE is among them. */
    record InitKeys(List<String> keys, boolean replace) {}

    /** {@code <key>:secret <key>:entrants <key>:perm <key>:wait}. */
    static List<String> drawKeys(String key) {
        return List.of(key + ":secret", key + ":entrants", key + ":perm", key + ":wait");
    }

    /**
     * INIT's keys from its arguments after the sale key ({@code total options...}): the STREAM
     * key, then the four draw keys with DRAW. Options are case-insensitive words whose values are
     * skipped as the library reads them ({@code STREAM skey [MAXLEN n]}, {@code SPLIT round n
     * peer...}, {@code BEACON name}), so a value that reads like a word is not taken for one; an
     * unknown word ends the reading (the server refuses the call, naming it).
     */
    static InitKeys initKeys(String key, List<String> args) {
        String stream = null;
        boolean draw = false;
        boolean replace = false;
        int i = 1;
        read:
        while (i < args.size()) {
            String w = args.get(i).toUpperCase(Locale.ROOT);
            if (ONE_VALUE.contains(w)) {
                i += 2;
            } else if (w.equals("STREAM")) {
                if (i + 1 < args.size() && stream == null) {
                    stream = args.get(i + 1);
                }
                i += 2;
                if (i < args.size() && args.get(i).equalsIgnoreCase("MAXLEN")) {
                    i += 2;
                }
            } else if (w.equals("SPLIT")) {
                int n;
                try {
                    n = Integer.parseInt(args.get(i + 2));
                } catch (IndexOutOfBoundsException | NumberFormatException e) {
                    break read;
                }
                if (n < 0) {
                    break read;
                }
                i += 3 + n;
            } else if (w.equals("DRAW") || w.equals("FENCE") || w.equals("REPLACE")) {
                draw |= w.equals("DRAW");
                replace |= w.equals("REPLACE");
                i++;
            } else {
                break read;
            }
        }
        List<String> keys = new ArrayList<>();
        if (stream != null) {
            keys.add(stream);
        }
        if (draw) {
            keys.addAll(drawKeys(key));
        }
        return new InitKeys(List.copyOf(keys), replace);
    }

    /**
     * What INIT ... REPLACE declares beyond the list seckill_keys gave for the sale it replaces:
     * a draw sale's four keys (it deletes them), the secret among them, which the list leaves out
     * (only INIT and DRAW touch it).
     */
    static List<String> replacedKeys(String key, List<String> listed) {
        List<String> four = drawKeys(key);
        return listed.contains(four.get(1)) ? four : List.of();
    }

    /** The keys {@code sub} declares given the sale's list: DRAW adds {@code <key>:secret}. */
    static List<String> forCall(String sub, String key, List<String> listed) {
        return sub.equals("DRAW") ? merged(listed, drawKeys(key).subList(0, 1)) : listed;
    }

    /** The lists' keys in order, each once. */
    @SafeVarargs
    static List<String> merged(List<String>... lists) {
        Set<String> out = new LinkedHashSet<>();
        for (List<String> l : lists) {
            out.addAll(l);
        }
        return List.copyOf(out);
    }

    /** What asks the library for the keys calls on the sale at {@code key} declare. */
    static Wire keysWire(String key) {
        return new Wire(List.of("FCALL_RO", "seckill_keys", "1", key), 3, null, Wire.Reply.ARRAY);
    }

    /** The library's version, asked with one key: the sale key at hand, else {@link #PROBE_KEY}. */
    static Wire versionWire(String key) {
        return new Wire(List.of("FCALL_RO", "seckill_version", "1", key == null ? PROBE_KEY : key), 3, null,
                Wire.Reply.BULK);
    }

    /** seckill_keys's reply: the keys. */
    static List<String> parseKeys(Object reply) {
        if (reply == null) {
            return List.of();
        }
        if (!(reply instanceof List<?> l)) {
            throw new ProtocolException("FCALL_RO seckill_keys answered " + Protocol.show(reply) + ", not keys");
        }
        List<String> out = new ArrayList<>(l.size());
        for (Object k : l) {
            out.add(Protocol.text(k, "a key seckill_keys listed"));
        }
        return List.copyOf(out);
    }

    /** Whether an error is the library's refusal of a key the call was not given. */
    static boolean undeclared(Throwable e) {
        return e instanceof CommandException ce && ce.getMessage() != null
                && ce.getMessage().startsWith("ERR undeclared key");
    }
}
