package io.seckill;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * The backend check without Redis: a transport answers each question from a table, so the
 * replies no server here gives (NOPERM for SECKILL.INFO, which Redis only gives where it
 * checks the ACL before the arity; it means the module, as in the Python client) are covered
 * too. RolesTest runs it on real servers.
 */
class BackendDetectionTest {
    static final String ARITY = "ERR wrong number of arguments for 'seckill.info' command";
    static final String INFO_NOPERM = "NOPERM this user has no permissions to run the 'seckill.info' command";
    static final String FCALL_NOPERM = "NOPERM this user has no permissions to run the 'fcall_ro' command";

    /** Answers by the command's name: a value, or a String starting with "-" for an error reply. */
    static final class Scripted implements Transport {
        final Map<String, Object> replies;
        final List<String> asked = new ArrayList<>();

        Scripted(Map<String, Object> replies) {
            this.replies = replies;
        }

        @Override
        public Object call(Wire wire) {
            asked.add(wire.name());
            Object r = replies.getOrDefault(wire.name(), "-ERR unknown command '" + wire.name() + "'");
            if (r instanceof RuntimeException e) {
                throw e;
            }
            if (r instanceof String s && s.startsWith("-")) {
                throw new CommandException(s.substring(1), null);
            }
            return r;
        }
    }

    private static Scripted asked;

    private static Backend detect(Map<String, Object> replies) {
        asked = new Scripted(replies);
        return SeckillClient.builder(asked).build().backend("sale:{x}");
    }

    @Test
    void theModuleByItsArityError() {
        assertEquals(Backend.MODULE, detect(Map.of("SECKILL.INFO", "-" + ARITY)));
        assertEquals(List.of("SECKILL.INFO"), asked.asked, "one question, no MODULE LIST");
        assertEquals(Backend.MODULE, detect(Map.of("SECKILL.INFO", List.of())), "any value comes from the module");
    }

    @Test
    void theLibraryByItsVersion() {
        assertEquals(Backend.FUNCTIONS, detect(Map.of("FCALL_RO", "1.2.0")));
        assertEquals(List.of("SECKILL.INFO", "FCALL_RO"), asked.asked);
        assertEquals(Backend.FUNCTIONS, detect(Map.of("SECKILL.INFO", "-ERR command not allowed by the proxy",
                "FCALL_RO", "1.2.0")));
    }

    @Test
    void noPermForSeckillInfoIsTheModule() {
        // the command was looked up before the ACL refused it: it exists, so the module is there
        // (the user may still be allowed RESERVE and the rest)
        assertEquals(Backend.MODULE, detect(Map.of("SECKILL.INFO", "-" + INFO_NOPERM)));
        assertEquals(List.of("SECKILL.INFO"), asked.asked, "FCALL_RO not asked");
        assertEquals(Backend.MODULE, detect(Map.of("SECKILL.INFO", "-" + INFO_NOPERM, "FCALL_RO", "-" + FCALL_NOPERM)));
        assertEquals(List.of("SECKILL.INFO"), asked.asked);
    }

    @Test
    void noPermForFcallRoNamesTheMissingRight() {
        // without the module, a refused FCALL_RO cannot tell whether the library is loaded
        BackendException e = assertThrows(BackendException.class, () -> detect(Map.of("FCALL_RO", "-" + FCALL_NOPERM)));
        assertTrue(e.getMessage().contains("+fcall +fcall_ro") && e.getMessage().contains(FCALL_NOPERM), e.getMessage());
        assertEquals("NOPERM", ((CommandException) e.getCause()).code());
        assertEquals(List.of("SECKILL.INFO", "FCALL_RO"), asked.asked);
    }

    @Test
    void neitherBackend() {
        BackendException e = assertThrows(BackendException.class, () -> detect(Map.of()));
        assertTrue(e.getMessage().contains("FUNCTION LOAD functions/seckill.lua"), e.getMessage());
        e = assertThrows(BackendException.class, () -> detect(Map.of("FCALL_RO", "-ERR Function not found")));
        assertTrue(e.getMessage().startsWith("neither the seckill module"), e.getMessage());
        e = assertThrows(BackendException.class, () -> detect(Map.of("FCALL_RO", "yes")));
        assertTrue(e.getMessage().contains("load functions/seckill.lua again"), e.getMessage());
    }

    @Test
    void aConnectionErrorIsNotAnAnswerAndNothingIsKept() {
        IllegalStateException cut = new IllegalStateException("connection refused");
        Scripted t = new Scripted(new java.util.HashMap<>(Map.of("SECKILL.INFO", cut)));
        SeckillClient c = SeckillClient.builder(t).build();
        assertSame(cut, assertThrows(IllegalStateException.class, () -> c.backend("k")));
        t.replies.put("SECKILL.INFO", "-" + ARITY);
        assertEquals(Backend.MODULE, c.backend("k"), "asked again after the failure");
    }
}
