package io.seckill;

/** SECKILL.GET's reply: one reservation as the sale keeps it. */
public record Reservation(String user, long qty, String state, long createdMs, long deadlineMs) {}
