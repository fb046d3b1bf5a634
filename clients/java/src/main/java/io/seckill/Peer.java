package io.seckill;

/** One declared peer of a split sale's key, from the report's {@code peers}. */
public record Peer(String peer, long sentTotal, long receivedTotal) {}
