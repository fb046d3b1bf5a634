package io.seckill.recipes;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * The page and the compiled recipes cannot drift: the first java block under each heading of
 * docs/clients.md is, line for line, what its source file holds between the
 * "// docs/clients.md begin" and "end" markers (the method's indentation taken off). No Redis.
 */
class RecipesTest {
    private static final Path REPO = Path.of(System.getProperty("user.dir")).resolve("../..").normalize();
    private static final Path SOURCES = Path.of(System.getProperty("user.dir"), "src/test/java/io/seckill/recipes");

    @ParameterizedTest(name = "{1} is the block under \"{0}\"")
    @CsvSource({
        "'### Spring Data Redis 3.x', SpringDataRecipe.java",
        "'### Redisson', RedissonShimRecipe.java",
    })
    void theDocsBlockIsTheCompiledCode(String heading, String file) throws IOException {
        List<String> doc = docBlock(Files.readAllLines(REPO.resolve("docs/clients.md")), heading);
        List<String> code = markedLines(Files.readAllLines(SOURCES.resolve(file)), file);
        assertTrue(doc.size() >= 3, "a java block under " + heading + ": " + doc);
        assertEquals(String.join("\n", doc), String.join("\n", code),
                "docs/clients.md under " + heading + " and " + file + " differ");
    }

    /** The lines of the first ```java block after the heading line that starts with {@code heading}. */
    static List<String> docBlock(List<String> page, String heading) {
        int i = 0;
        while (i < page.size() && !page.get(i).startsWith(heading)) {
            i++;
        }
        assertTrue(i < page.size(), "docs/clients.md has no heading " + heading);
        i++;
        while (i < page.size() && !page.get(i).equals("```java")) {
            assertTrue(!page.get(i).startsWith("#"), "no java block under " + heading + " before " + page.get(i));
            i++;
        }
        List<String> out = new ArrayList<>();
        for (i++; i < page.size() && !page.get(i).equals("```"); i++) {
            out.add(page.get(i));
        }
        return out;
    }

    /** The lines between the markers, less the indentation of the begin marker. */
    static List<String> markedLines(List<String> source, String file) {
        int begin = -1;
        int end = -1;
        for (int i = 0; i < source.size(); i++) {
            String t = source.get(i).strip();
            if (t.equals("// docs/clients.md begin")) {
                begin = i;
            } else if (t.equals("// docs/clients.md end")) {
                end = i;
            }
        }
        assertTrue(begin >= 0 && end > begin, file + " has no begin/end markers");
        String indent = source.get(begin).substring(0, source.get(begin).indexOf('/'));
        List<String> out = new ArrayList<>();
        for (String line : source.subList(begin + 1, end)) {
            assertTrue(line.isEmpty() || line.startsWith(indent), file + ": less indented than its marker: " + line);
            out.add(line.isEmpty() ? line : line.substring(indent.length()));
        }
        return out;
    }
}
