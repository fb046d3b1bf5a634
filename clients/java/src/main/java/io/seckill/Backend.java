package io.seckill;

import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Set;

/**
 * What serves SECKILL: the module's commands, or the Redis Functions library
 * functions/seckill.lua ({@code SECKILL.X key args...} is {@code FCALL seckill_x n key keys... args...}
 * with the other keys the call touches, {@code FCALL_RO} for the reads: {@link LibraryKeys}).
 * Chosen once per {@link SeckillClient}.
 */
public enum Backend {
    MODULE,
    FUNCTIONS;

    /** The library's no-writes functions: called with FCALL_RO (they run on replicas too). */
    static final Set<String> READ_ONLY = Set.of("INFO", "GET", "ENTRANTS");

    /** One command as this backend takes it: {@code sub} is INFO, RESERVE, ... */
    Wire wire(String sub, String key, List<String> args, Wire.Reply reply) {
        return wire(sub, key, List.of(), args, reply);
    }

    /** The same, declaring {@code keys} after the sale key to the library (the module ignores them). */
    Wire wire(String sub, String key, List<String> keys, List<String> args, Wire.Reply reply) {
        List<String> words = new ArrayList<>(args.size() + keys.size() + 4);
        int keyIndex;
        if (this == MODULE) {
            words.add("SECKILL." + sub);
            keyIndex = 1;
        } else {
            words.add(READ_ONLY.contains(sub) ? "FCALL_RO" : "FCALL");
            words.add("seckill_" + sub.toLowerCase(Locale.ROOT));
            words.add(Integer.toString(1 + keys.size()));
            keyIndex = 3;
        }
        words.add(key);
        if (this == FUNCTIONS) {
            words.addAll(keys);
        }
        words.addAll(args);
        return new Wire(List.copyOf(words), keyIndex, null, reply);
    }
}
