package io.seckill;

import java.util.EnumSet;
import java.util.Set;

/** SECKILL.RELEASE's and SECKILL.CONFIRM's statuses. */
public enum SettleStatus {
    RELEASED, ALREADY_RELEASED, CONFIRMED, ALREADY_CONFIRMED, NOT_FOUND;

    /** What RELEASE may answer. */
    public static final Set<SettleStatus> RELEASE = EnumSet.of(RELEASED, ALREADY_RELEASED, CONFIRMED, NOT_FOUND);
    /** What CONFIRM may answer. */
    public static final Set<SettleStatus> CONFIRM = EnumSet.of(CONFIRMED, ALREADY_CONFIRMED, RELEASED, NOT_FOUND);
}
