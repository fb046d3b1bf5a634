package io.seckill;

import java.util.List;
import java.util.Map;

/**
 * RECONCILE over every chunk of a ledger: each class's count and ids summed, the sale's
 * report as it stood after the last chunk.
 *
 * @param unfenced what UNFENCE answered after an APPLY left a fenced sale reconciled;
 *                 null when it was not called
 */
public record ReconcileResult(Map<String, Long> counts, Map<String, List<String>> ids, Report report,
                              int calls, UnfenceStatus unfenced) {
    /** Every order row is {@code ok} (confirmed in the sale). */
    public boolean clean() {
        return counts.entrySet().stream().allMatch(e -> e.getKey().equals("ok") || e.getValue() == 0);
    }
}
