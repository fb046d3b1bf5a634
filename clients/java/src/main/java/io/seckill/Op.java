package io.seckill;

import java.util.List;
import java.util.function.Function;

/** One SECKILL command on a sale, for either backend and either call style. */
record Op<T>(String sub, List<String> args, Wire.Reply reply, Function<Object, T> parse) {

    static Op<Boolean> init(long total, InitOptions o) {
        List<String> a = new java.util.ArrayList<>(List.of(Long.toString(total)));
        a.addAll(o.args());
        return new Op<>("INIT", a, Wire.Reply.STATUS, Protocol::parseInit);
    }

    static Op<Reserved> reserve(String user, long qty, String reqid) {
        return new Op<>("RESERVE", Protocol.reserveArgs(user, qty, reqid), Wire.Reply.ARRAY, Protocol::parseReserved);
    }

    static Op<Settled> release(String rid) {
        return new Op<>("RELEASE", List.of(Protocol.checkId(rid, "reservation id")), Wire.Reply.ARRAY,
                r -> Protocol.parseSettled(r, SettleStatus.RELEASE, "SECKILL.RELEASE"));
    }

    static Op<Settled> confirm(String rid) {
        return new Op<>("CONFIRM", List.of(Protocol.checkId(rid, "reservation id")), Wire.Reply.ARRAY,
                r -> Protocol.parseSettled(r, SettleStatus.CONFIRM, "SECKILL.CONFIRM"));
    }

    static Op<Report> info() {
        return new Op<>("INFO", List.of("FORMAT", "JSON"), Wire.Reply.BULK,
                r -> Protocol.parseReportJson(json(r)));
    }

    static Op<Reservation> get(String rid) {
        return new Op<>("GET", List.of(Protocol.checkId(rid, "reservation id"), "FORMAT", "JSON"), Wire.Reply.BULK,
                r -> Protocol.parseReservationJson(json(r)));
    }

    static Op<Report> reconcile(List<Order> chunk, boolean expire, boolean apply) {
        return new Op<>("RECONCILE", Protocol.reconcileArgs(chunk, expire, apply), Wire.Reply.BULK,
                r -> Protocol.parseReportJson(json(r)));
    }

    static Op<Entered> enter(String user, long qty, String reqid) {
        return new Op<>("ENTER", Protocol.enterArgs(user, qty, reqid), Wire.Reply.ARRAY, Protocol::parseEntered);
    }

    static Op<Drawn> draw(int count, String beaconValue) {
        return new Op<>("DRAW", Protocol.drawArgs(count, beaconValue), Wire.Reply.ARRAY, Protocol::parseDrawn);
    }

    static Op<EntrantsPage> entrants(String cursor, int count) {
        return new Op<>("ENTRANTS", Protocol.entrantsArgs(cursor, count), Wire.Reply.ARRAY, Protocol::parseEntrants);
    }

    static Op<UnfenceStatus> unfence() {
        return new Op<>("UNFENCE", List.of(), Wire.Reply.STATUS, Protocol::parseUnfence);
    }

    private static String json(Object r) {
        return r == null ? null : Protocol.text(r, "the JSON report");
    }
}
