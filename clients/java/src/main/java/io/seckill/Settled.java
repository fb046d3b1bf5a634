package io.seckill;

/** SECKILL.RELEASE's or SECKILL.CONFIRM's reply: {@code [status, remaining]}. */
public record Settled(SettleStatus status, long remaining) {}
