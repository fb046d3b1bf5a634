package io.seckill;

import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Set;

/**
 * What serves SECKILL: the module's commands, or the Redis Functions library
 * functions/seckill.lua ({@code SECKILL.X key args...} is {@code FCALL seckill_x 1 key args...},
 * {@code FCALL_RO} for the reads). Chosen once per {@link SeckillClient}.
 */
public enum Backend {
    MODULE,
    FUNCTIONS;

    /** The library's no-writes functions: called with FCALL_RO (they run on replicas too). */
    static final Set<String> READ_ONLY = Set.of("INFO", "GET", "ENTRANTS");

    /** One command as this backend takes it: {@code sub} is INFO, RESERVE, ... */
    Wire wire(String sub, String key, List<String> args, Wire.Reply reply) {
        List<String> words = new ArrayList<>(args.size() + 4);
        int keyIndex;
        if (this == MODULE) {
            words.add("SECKILL." + sub);
            keyIndex = 1;
        } else {
            words.add(READ_ONLY.contains(sub) ? "FCALL_RO" : "FCALL");
            words.add("seckill_" + sub.toLowerCase(Locale.ROOT));
            words.add("1");
            keyIndex = 3;
        }
        words.add(key);
        words.addAll(args);
        return new Wire(List.copyOf(words), keyIndex, null, reply);
    }
}
