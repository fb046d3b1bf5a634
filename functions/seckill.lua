#!lua name=seckill
--[[
redis-seckill as a Redis Functions library: the SECKILL.* contract of the
module (docs/commands.md, README "Commands") for servers that cannot load modules.

  FUNCTION LOAD REPLACE "$(cat functions/seckill.lua)"    (or redis-cli -x FUNCTION LOAD REPLACE < functions/seckill.lua)
  FCALL    seckill_reserve 1 sale:{1001} user:42 REQID order-7f3a
  FCALL_RO seckill_info    1 sale:{1001}

Every SECKILL.X key args... is FCALL seckill_x n key [keys...] args..., with
the module's arguments, defaults, ranges, order of checks, replies and error
texts; the keys after the sale key are those FCALL_RO seckill_keys 1 key
lists (the sale's stream, a draw sale's keys), so that every key a call
touches is declared (a call missing one is refused before it writes).
docs/managed-redis.md lists what differs and why. No function has the
allow-oom flag (some managed services refuse it): over maxmemory the server
refuses every function that may write.

Data: one hash per sale (the sale key) plus its reservation stream, if any.
Fields of the hash:
  m                  the sale's settings and counters, packed (meta_fmt):
                     layout total shards limit hold start end tag n rem pend
                     conf rel exp buyers hc hn hd t0 lc ci sent recv as 23
                     doubles, then the stream key, its owner, MAXLEN and the
                     split round as <length>:<bytes>, and for a FENCE sale
                     (layouts 3 and 7) the replication id it recorded
  peers              a split sale's declared peers, sorted, as <length>:<bytes>
  b:<i> a:<i>        bucket i: remaining units, allocation (no b:0 when the
                     sale has one bucket: its remaining units are `rem`)
  <seq>              reservation seq (creation order): "<S><qty>,<created - t0>,
                     <takes>,<older live>,<newer live>,<id length>,<id><user>"
                     S: p c r x = pending confirmed released expired; upper
                     case when the record has a hold deadline (created + hold)
  i:<id>             seq of a reservation whose id the client gave (REQID)
  u:<user>           "<head>:<live qty>[:<loose>]" of a buyer with live units:
                     head its chain's newest record (the chain links its
                     live records through <older live>/<newer live>),
                     loose the newest retaken record kept out of the chain
                     (layouts + 8, LAYOUT_LOOSE below); either may be empty
  p:<peer>           "<sent>:<received>[:<to>]" per declared peer (split
                     sales); <to> the peer's incarnation <sent> was counted
                     for (docs/cluster.md, "Rounds"), once a SEND named one
  t:<tid>            a SEND transfer id already taken
  k                  the key of generated ids, 32 hex digits, drawn at INIT
                     (absent in a sale from before it: ids `<tag>-<seq>`)
  d, E:<user>, I:<reqid>   a draw sale's state, entrants and their REQIDs
                     (layout 5; "draw sales" below, with the keys a draw
                     sale keeps beside the hash: <key>:secret until its
                     first DRAW, <key>:entrants, <key>:perm, <key>:wait)
DEL key deletes the whole sale (its stream stays, as with the module); a
draw sale is UNLINK key <key>:secret <key>:entrants <key>:perm <key>:wait.

Holds without a timer: HOLD is fixed per round, so creation order is deadline
order. `hc` is a cursor on the oldest record that may be a pending hold, `hd`
that hold's deadline; every call on a sale first releases up to 128 due holds
from there (oldest first; 64 with a stream), and FCALL seckill_expire n key
[keys...] [count] releases up to count (as many at most) on demand,
answering [released, more].
]]

local VERSION = '1.4.0'
local LAYOUT = 1                      -- a sale; a draw sale (INIT ... DRAW) is LAYOUT_DRAW
-- Draws v2 (the secret in <key>:secret, the entrant digest, the Fisher-Yates
-- order): layout 5. An older library refuses it rather than sell it first
-- come; this one refuses the draw sales of v1 (layouts 2 and 4: the order
-- in <key>:draw, the seed in the hash) with the same error: finish them
-- with the library that made them (docs/upgrading.md).
local LAYOUT_DRAW = 5
-- A FENCE sale's layout is its plain or draw layout + LAYOUT_FENCE (3, 7):
-- an older library refuses it rather than sell it through a failover.
local LAYOUT_FENCE = 2
-- A sale in which RECONCILE APPLY retook a reservation older than its
-- buyer's newest live one: + LAYOUT_LOOSE (9, 11, 13, 15). That record stays
-- out of its buyer's chain (u:<user> names it, "buyers" below), which an
-- older library would not read: it refuses the sale instead.
local LAYOUT_LOOSE = 8
local MAX_TOTAL = 1000000000000000
local MAX_SHARDS = 1024
local MAX_PEERS = 1024
local MAX_ROUND = 64
local MAX_ID = 256
local MAX_TTL_S = 315360000           -- ten years
local MAX_TIME_MS = 253402300799999   -- year 9999
local MAX_ORDERS = 1000
local LAZY_CHUNK = 128                -- due holds a call releases before its own work
local EXPIRE_MAX = 256                -- seckill_expire's largest count
-- What one call releases at most, whatever it asks (seckill_expire answers
-- more = 1 and is called again): about 2 ms on Redis 7.0.15 on the shared
-- 2-core test machine, at any sale size (medians of 6 calls: 128 holds 1.2
-- to 1.3 ms, 256 holds 2.1 to 2.4 ms; with a stream, one XADD and one id
-- each, 64 holds 1.2 ms, 128 holds 2.0 ms, 256 holds 3.6 ms).
local HOLDS_PER_CALL, HOLDS_PER_CALL_STREAM = 128, 64
local SCAN_BUDGET = 256               -- records a call reads to move the hold cursor (1,024: 3 to 6 ms)
local DRAW_COUNT, DRAW_COUNT_MAX = 1000, 1000    -- DRAW COUNT: winners per call (4 x COUNT examined)
-- What one DRAW call makes at most in the library, whatever COUNT asks: a
-- winner costs about 30 us of Lua (COUNT 1000 took 30 ms at 1M entrants,
-- 100 about 3 ms). The contract's "at most COUNT" holds; clients repeat
-- DRAW until left_to_draw is 0 on either backend.
local DRAW_CALL_MAX = 100
-- And the entrants it looks at: at most 4 x COUNT as the contract says, and
-- at most 200 (each a SHA-1, a read of <key>:perm, a LINDEX of
-- <key>:entrants and, when it does not win, a ZADD to <key>:wait: about 20
-- us at 1M entrants; a call that makes no winner took 7 to 13 ms of CPU
-- with 400 of them on the shared test machine).
local DRAW_LOOK_MAX = 200
local ENTRANTS_COUNT, ENTRANTS_MAX = 100, 1000   -- ENTRANTS COUNT
local PROMOTE_MAX = 128               -- waitlist promotions a call makes at most
local PROMOTE_SCAN = 512              -- waiting entrants a call looks at for them at most
local PROMOTE_REACH = 128             -- of which draw positions not reached yet (a SHA-1, a LINDEX each)
local NOT_DRAW = 'ERR the sale is not a draw sale (INIT ... DRAW)'
local U64_MAX = '18446744073709551615'
local I64_MAX = '9223372036854775807'
local EXACT = '9007199254740992'      -- 2^53: larger numbers stay strings
local CHANNEL = 'seckill:events:'     -- PUBLISH seckill:events:<key> seckill.soldout|seckill.restock
local WRONGTYPE = 'WRONGTYPE Operation against a key holding the wrong kind of value'
local FENCED = 'FENCED the sale is fenced since a failover or restart: reconcile it with the order ledger, '
    .. 'then SECKILL.UNFENCE'
local STATE_WORD = {p = 'pending', c = 'confirmed', r = 'released', x = 'released'}

-- Refusals are raised as tables and turned into error replies by `entry`.
local function fail(msg) error({seckill = msg}, 0) end
local function num(n) return string.format('%d', n) end

------------------------------------------------------------------ numbers

-- Byte order (Lua's `<` on strings follows the locale's collation).
local function bytecmp(a, b)
    if a == b then return 0 end
    local n = #a < #b and #a or #b
    for i = 1, n do
        local x, y = string.byte(a, i), string.byte(b, i)
        if x ~= y then return x < y and -1 or 1 end
    end
    return #a < #b and -1 or 1
end

-- Compares canonical decimal strings.
local function deccmp(a, b)
    if #a ~= #b then return #a < #b and -1 or 1 end
    return bytecmp(a, b)
end

-- A decimal u64 in min..max (numbers, or digit strings past 2^53), naming
-- `name` in every error, as args.rs parse_u64. Returns the number (nil past
-- 2^53) and the canonical digits.
local function parse_u64(name, raw, min, max)
    if string.byte(raw, 1) == 45 and #raw > 1 and not string.find(raw, '[^0-9]', 2) then
        fail('ERR ' .. name .. ' must not be negative')
    end
    if raw == '' or string.find(raw, '[^0-9]') then fail('ERR ' .. name .. ' is not an integer') end
    local d = raw:gsub('^0+', '')
    if d == '' then d = '0' end
    if deccmp(d, U64_MAX) > 0 then fail('ERR ' .. name .. ' is past 64 bits') end
    local mins = type(min) == 'string' and min or num(min)
    local maxs = type(max) == 'string' and max or num(max)
    if deccmp(d, mins) < 0 or deccmp(d, maxs) > 0 then
        fail('ERR ' .. name .. ' must be from ' .. mins .. ' to ' .. maxs)
    end
    if deccmp(d, EXACT) <= 0 then return tonumber(d), d end
    return nil, d
end

-- q = math.floor(a / b) for integers below 2^53, exactly.
local function idiv(a, b)
    local q = math.floor(a / b)
    while q * b > a do q = q - 1 end
    while (q + 1) * b <= a do q = q + 1 end
    return q
end

---------------------------------------------------------------- arguments

local function parse_id(name, raw)
    if #raw < 1 or #raw > MAX_ID then fail('ERR ' .. name .. ' must be 1 to 256 bytes') end
    return raw
end

local function option_word(raw)
    if #raw <= 16 and not string.find(raw, '[^A-Za-z]') then return raw:upper() end
    return nil
end

-- Named like a plain word (upper-cased) when printable ASCII of at most 32
-- bytes (`#`, `x1`: a pasted comment, a typo); longer or unprintable: unnamed.
local function unknown_option(raw)
    if #raw >= 1 and #raw <= 32 and not string.find(raw, '[^\33-\126]') then
        fail("ERR unknown option '" .. raw:upper() .. "'")
    end
    fail('ERR unknown option')
end

-- `name value` options, refusing repeats (args.rs Options).
local Opts = {}
Opts.__index = Opts
local function options(args, pos) return setmetatable({a = args, p = pos, seen = {}}, Opts) end
function Opts:next_word()
    local w = self.a[self.p]
    if w ~= nil then self.p = self.p + 1 end
    return w
end
-- Iterates over the words left: (option word or '', the word itself), so
-- that an unknown word reaches `unknown_option` as typed.
function Opts:words()
    return function()
        local word = self:next_word()
        if word == nil then return nil end
        return option_word(word) or '', word
    end
end
function Opts:once(name)
    if self.seen[name] then fail('ERR option ' .. name .. ' given twice') end
    self.seen[name] = true
end
-- A word option given once: true.
function Opts:flag(name)
    self:once(name)
    return true
end
-- A `name value` option given once: its value.
function Opts:once_value(name)
    self:once(name)
    return self:value(name)
end
function Opts:value(name)
    local v = self.a[self.p]
    if v == nil then fail('ERR ' .. name .. ' needs a value') end
    self.p = self.p + 1
    return v
end
function Opts:number(name, min, max)
    self:once(name)
    return parse_u64(name, self:value(name), min, max)
end
function Opts:peek_is(word)
    local w = self.a[self.p]
    if w ~= nil and w:upper() == word then
        self.p = self.p + 1
        return true
    end
    return false
end

------------------------------------------------------------- cluster slots

-- CRC16 (XMODEM) table, made on first use: a library's top level runs
-- without the standard globals.
local CRC = nil
local function crc_table()
    local t = {}
    for i = 0, 255 do
        local crc = bit.lshift(i, 8)
        for _ = 1, 8 do
            if bit.band(crc, 0x8000) ~= 0 then crc = bit.bxor(bit.lshift(crc, 1), 0x1021) else crc = bit.lshift(crc, 1) end
            crc = bit.band(crc, 0xffff)
        end
        t[i] = crc
    end
    return t
end

local function hash_tag(key)
    local s = string.find(key, '{', 1, true)
    if s then
        local e = string.find(key, '}', s + 1, true)
        if e and e > s + 1 then return string.sub(key, s + 1, e - 1) end
    end
    return nil
end

local function key_slot(key)
    local s = hash_tag(key) or key
    if CRC == nil then CRC = crc_table() end
    local crc = 0
    for i = 1, #s do
        crc = bit.band(bit.bxor(bit.lshift(crc, 8), CRC[bit.band(bit.bxor(bit.rshift(crc, 8), string.byte(s, i)), 0xff)]), 0xffff)
    end
    return crc % 16384
end

-- The buyer's home bucket: FNV-1a 64 of the user id, mod n (buckets.rs
-- home_of), on four 16-bit limbs.
local function home_of(user, n)
    if n == 1 then return 0 end
    local l0, l1, l2, l3 = 0x2325, 0x8422, 0x9ce4, 0xcbf2
    for i = 1, #user do
        l0 = bit.bxor(l0, string.byte(user, i))
        -- h * 0x1b3 + (h << 40)
        local t = l0 * 0x1b3
        local m0 = t % 65536
        t = l1 * 0x1b3 + (t - m0) / 65536
        local m1 = t % 65536
        t = l2 * 0x1b3 + (t - m1) / 65536
        local m2 = t % 65536
        t = l3 * 0x1b3 + (t - m2) / 65536
        local m3 = t % 65536
        m2 = m2 + (l0 % 256) * 256
        if m2 >= 65536 then
            m2 = m2 - 65536
            m3 = m3 + 1
        end
        m3 = (m3 + (l0 - l0 % 256) / 256 + (l1 % 256) * 256) % 65536
        l0, l1, l2, l3 = m0, m1, m2, m3
    end
    local r = l3 % n
    r = (r * 65536 + l2) % n
    r = (r * 65536 + l1) % n
    return (r * 65536 + l0) % n
end

---------------------------------------------------------------- SHA-256

-- FIPS 180-4 SHA-256 on Lua BitOp (32-bit signed words; bit.tobit folds a
-- sum back to 32 bits). Redis Lua has only sha1hex. Tested against Python's
-- hashlib (tests/functions/test_library.py test_sha256_vectors).
local SHA_K = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2}
local SHA_W = {}   -- the message schedule, reused by every call
local SHA_BLOCK = '>i4i4i4i4i4i4i4i4i4i4i4i4i4i4i4i4'

-- The 32-byte digest of `msg` (a binary string).
local function sha256(msg)
    local band, bor, bxor, ror, rshift, tobit = bit.band, bit.bor, bit.bxor, bit.ror, bit.rshift, bit.tobit
    local len = #msg
    -- Padding: 0x80, zeros to 56 mod 64, the length in bits as 64-bit big endian.
    msg = msg .. '\128' .. string.rep('\0', (55 - len) % 64)
        .. struct.pack('>I4I4', math.floor(len / 536870912), (len % 536870912) * 8)
    -- The initial hash value H(0), as signed words.
    local h1, h2, h3, h4 = 0x6a09e667, -0x4498517b, 0x3c6ef372, -0x5ab00ac6
    local h5, h6, h7, h8 = 0x510e527f, -0x64fa9774, 0x1f83d9ab, 0x5be0cd19
    local w, k = SHA_W, SHA_K
    for pos = 1, #msg, 64 do
        w[1], w[2], w[3], w[4], w[5], w[6], w[7], w[8], w[9], w[10], w[11], w[12], w[13], w[14], w[15], w[16] =
            struct.unpack(SHA_BLOCK, msg, pos)
        for j = 17, 64 do
            local a, b = w[j - 15], w[j - 2]
            w[j] = tobit(w[j - 16] + w[j - 7] + bxor(ror(a, 7), ror(a, 18), rshift(a, 3))
                + bxor(ror(b, 17), ror(b, 19), rshift(b, 10)))
        end
        local a, b, c, d, e, f, g, hh = h1, h2, h3, h4, h5, h6, h7, h8
        for j = 1, 64 do
            local t1 = hh + bxor(ror(e, 6), ror(e, 11), ror(e, 25)) + bxor(g, band(e, bxor(f, g))) + k[j] + w[j]
            local t2 = bxor(ror(a, 2), ror(a, 13), ror(a, 22)) + bor(band(a, b), band(c, bor(a, b)))
            hh, g, f, e, d, c, b, a = g, f, e, tobit(d + t1), c, b, a, tobit(t1 + t2)
        end
        h1, h2, h3, h4 = tobit(h1 + a), tobit(h2 + b), tobit(h3 + c), tobit(h4 + d)
        h5, h6, h7, h8 = tobit(h5 + e), tobit(h6 + f), tobit(h7 + g), tobit(h8 + hh)
    end
    return struct.pack('>i4i4i4i4i4i4i4i4', h1, h2, h3, h4, h5, h6, h7, h8)
end

local function tohex(s)
    local out = {}
    for i = 1, #s, 4 do out[#out + 1] = bit.tohex((struct.unpack('>i4', s, i))) end
    return table.concat(out)
end

------------------------------------------------------------------ records

local function rec_parse(s, seq)
    local st, qty, off, takes, prev, nxt, idlen, pos = s:match('^(%a)(%d+),(%-?%d+),([^,]*),(%d*),(%d*),(%d+),()')
    idlen = tonumber(idlen)
    return {seq = seq, st = st, qty = tonumber(qty), off = tonumber(off), takes = takes, prev = tonumber(prev),
            next = tonumber(nxt), id = idlen > 0 and string.sub(s, pos, pos + idlen - 1) or nil,
            user = string.sub(s, pos + idlen)}
end

local function rec_fmt(r)
    local id = r.id or ''
    return r.st .. num(r.qty) .. ',' .. num(r.off) .. ',' .. r.takes .. ',' .. (r.prev and num(r.prev) or '') .. ','
        .. (r.next and num(r.next) or '') .. ',' .. #id .. ',' .. id .. r.user
end

-- "b" (all of the record's units from bucket b) or "b:q;b:q;...".
local function takes_parse(t, qty)
    if t == '' then return {} end
    if not string.find(t, ':', 1, true) then return {{tonumber(t), qty}} end
    local out = {}
    for b, q in t:gmatch('(%d+):(%d+)') do out[#out + 1] = {tonumber(b), tonumber(q)} end
    return out
end

local function takes_fmt(list)
    if #list == 0 then return '' end
    if #list == 1 then return num(list[1][1]) end
    local parts = {}
    for i, t in ipairs(list) do parts[i] = num(t[1]) .. ':' .. num(t[2]) end
    return table.concat(parts, ';')
end

local function has_deadline(r) return string.byte(r.st) < 97 end
local function state_of(r) return r.st:lower() end
local function set_state(r, s) r.st = has_deadline(r) and s:upper() or s end

--------------------------------------------------------------- the sale

-- The sale's settings and counters, packed in one field `m` (one read, one
-- write per call) with the struct library: 22 little-endian doubles (exact:
-- every value is below 2^53), then the stream key, its owner, MAXLEN and the
-- split round as <length>:<bytes> (length 0: absent). The first number is
-- the layout; END is -1 when the sale has no end; the tag is a number. A
-- FENCE sale adds a fifth string, the replication id it recorded (other
-- sales keep the four, byte for byte).
local META_FORMAT = '<ddddddddddddddddddddddd'  -- 23 doubles
local META_BYTES = 23 * 8

local function lp(s) return s and (#s .. ':' .. s) or '0:' end

local function meta_numbers(S)
    return S.layout or LAYOUT, S.total, S.shards, S.limit, S.hold, S.start, S.end_ or -1, S.tag_n, S.n, S.rem, S.pend, S.conf,
        S.rel, S.exp, S.buyers, S.hc, S.hn, S.hd, S.t0, S.lc, S.ci, S.sent, S.recv
end

local function meta_fmt(S)
    local m = struct.pack(META_FORMAT, meta_numbers(S)) .. lp(S.stream) .. lp(S.owner) .. lp(S.maxlen) .. lp(S.round)
    if S.fence then m = m .. lp(S.fence) end
    return m
end

-- Up to `max` <length>:<bytes> strings of `m` from byte `pos`, as a list
-- (a string of length 0 is absent: nil).
local function lp_strings(m, pos, max)
    local strings = {}
    for i = 1, max do
        if pos > #m then break end
        local len, at = m:match('^(%d+):()', pos)
        len = tonumber(len)
        if len > 0 then strings[i] = string.sub(m, at, at + len - 1) end
        pos = at + len
    end
    return strings
end

-- The server's replication id (`master_replid` of INFO replication; on a
-- replica its master's). Called for FENCE sales only: a plain sale never
-- pays for the INFO call.
local function server_replid()
    -- An ACL refusal inside a function cannot be caught: ask first (the
    -- question itself fails where INFO is renamed away).
    local known, allowed = pcall(redis.acl_check_cmd, 'INFO', 'replication')
    if not known then fail('ERR a FENCE sale needs INFO, and this server has no INFO command') end
    if not allowed then fail('NOPERM a FENCE sale needs INFO: this user may not run INFO replication') end
    local info = redis.call('INFO', 'replication')
    -- (A plain find, then an anchored match: a quarter of the pattern's time.)
    local at = string.find(info, 'master_replid:', 1, true)
    local id = at and info:match('^%x+', at + 14)
    if not id then fail('ERR INFO replication shows no master_replid: this server cannot fence a sale') end
    return id
end

-- Whether a counter changed since the sale was read (the settings never
-- change after INIT).
local function meta_changed(S)
    local o = S.o
    return S.layout ~= o[1] or S.n ~= o[9] or S.rem ~= o[10] or S.pend ~= o[11] or S.conf ~= o[12]
        or S.rel ~= o[13] or S.exp ~= o[14]
        or S.buyers ~= o[15] or S.hc ~= o[16] or S.hn ~= o[17] or S.hd ~= o[18] or S.lc ~= o[20] or S.ci ~= o[21]
        or S.sent ~= o[22] or S.recv ~= o[23]
end

local Sale = {}
Sale.__index = Sale

local function now_ms()
    local t = redis.call('TIME')
    return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- The keys the current call declared (FCALL's KEYS) and what it must have
-- declared besides the sale key: 'w' a write (the sale's stream, a draw
-- sale's <key>:entrants, :perm and :wait), 'd' a DRAW (those and
-- <key>:secret), 'e' ENTRANTS (<key>:entrants), nil a read of the hash
-- alone. Set by `entry` for each call; checked when the sale is opened,
-- before anything is written, so managed services that lock or route by
-- the declared keys see every key a call touches.
local CALL = {keys = {}, need = nil}

local function need_key(k)
    local keys = CALL.keys
    for i = 2, #keys do
        if keys[i] == k then return end
    end
    fail('ERR undeclared key ' .. k .. ': pass the keys FCALL_RO seckill_keys 1 ' .. keys[1]
        .. ' lists after the sale key')
end

-- The sale at `key`, nil when the key does not exist; WRONGTYPE for a key
-- of another type, or a hash that is not a sale. Fields `f1`, `f2` (a
-- buyer, a REQID; f2 only with f1) are read in the same call, and bucket
-- 0, which a one-bucket sale does not store (it is `rem`). `pre`: what
-- RESERVE's fast path read, {m, f1's value, f2's value}. (The sale table is
-- made by one constructor: growing a Lua table field by field rehashes it
-- several times, a measurable part of a call.)
local function open(key, f1, f2, pre)
    local v, b0 = pre, nil
    if not v then
        if f2 then
            v = redis.call('HMGET', key, 'm', f1, f2, 'b:0')
            b0 = v[4]
        elseif f1 then
            v = redis.call('HMGET', key, 'm', f1, 'b:0')
            b0 = v[3]
        else
            v = redis.call('HMGET', key, 'm', 'b:0')
            b0 = v[2]
        end
    end
    local m = v[1]
    if not m then
        if redis.call('EXISTS', key) == 1 then fail(WRONGTYPE) end
        return nil
    end
    local x = #m >= META_BYTES and {struct.unpack(META_FORMAT, m)} or {}
    local layout = x[1]
    -- (The layout without LAYOUT_LOOSE: the sale's kind.)
    if layout and layout > LAYOUT_LOOSE and layout < 2 * LAYOUT_LOOSE then layout = layout - LAYOUT_LOOSE end
    if layout ~= LAYOUT and layout ~= LAYOUT_DRAW and layout ~= LAYOUT + LAYOUT_FENCE
        and layout ~= LAYOUT_DRAW + LAYOUT_FENCE then
        -- A hash whose `m` is no sale's settings (too short, or no layout
        -- number a library would write: an integer 1 to 255) is not a sale,
        -- as any hash is to the module.
        if not layout or layout < 1 or layout > 255 or layout ~= math.floor(layout) then fail(WRONGTYPE) end
        fail('ERR the sale at this key was written by another version of the seckill library (layout '
            .. tostring(x[1] or '?') .. ')')
    end
    local strings = {}
    if string.sub(m, META_BYTES + 1) ~= '0:0:0:0:' then strings = lp_strings(m, META_BYTES + 1, 5) end
    local c = {}
    if f1 then c[f1] = v[2] end
    if f2 then c[f2] = v[3] end
    local draw = layout == LAYOUT_DRAW or layout == LAYOUT_DRAW + LAYOUT_FENCE
    local one = x[3] == 1
    local S = setmetatable({key = key, m = m, o = x, w = {}, c = c, r = {}, rd = {},
                            bk = {[0] = one and x[10] or tonumber(b0)}, stale_b0 = one and b0 and true,
                            al = {}, bd = {}, ev = {}, hd_hint = false, layout = x[1], draw = draw,
                            lkey = draw and key .. ':entrants' or nil,
                            total = x[2], shards = x[3], limit = x[4], hold = x[5], start = x[6],
                            end_ = x[7] >= 0 and x[7] or nil, tag_n = x[8], tag = string.format('%08x', x[8]),
                            n = x[9], rem = x[10], pend = x[11], conf = x[12], rel = x[13], exp = x[14],
                            buyers = x[15], hc = x[16], hn = x[17], hd = x[18], t0 = x[19], lc = x[20], ci = x[21],
                            sent = x[22], recv = x[23],
                            stream = strings[1], owner = strings[2], maxlen = strings[3], round = strings[4]}, Sale)
    -- (Set apart: a field more in the constructor could grow every sale's table.)
    if strings[5] then S.fence = strings[5] end
    if draw then
        -- The permutation's cache and writes, the waitlist's changes (draw sales).
        S.pkey, S.wkey = key .. ':perm', key .. ':wait'
        S.P, S.Pin, S.Pw, S.T, S.wadd, S.wnew, S.wrem = {}, {}, {}, {}, {}, {}, {}
    end
    if CALL.need and key == CALL.keys[1] then S:check_declared(CALL.need) end
    return S
end

-- Whether the sale is fenced: a FENCE sale whose recorded replication id
-- is not the server's (a promotion or a restart since INIT or UNFENCE).
-- Asked once per call (`server_id`: the id read).
function Sale:fenced()
    if not self.fence then return false end
    if self.is_fenced == nil then
        self.server_id = server_replid()
        self.is_fenced = self.server_id ~= self.fence
    end
    return self.is_fenced
end

function Sale:get(f)
    local v = self.w[f]
    if v ~= nil then return v end
    v = self.c[f]
    if v == nil then
        v = redis.call('HGET', self.key, f)
        self.c[f] = v
    end
    return v
end

function Sale:set(f, v) self.w[f] = v end

-- Reads the fields that are neither written nor cached yet, in one call.
function Sale:prefetch_fields(fields)
    local want = {}
    for _, f in ipairs(fields) do
        if self.w[f] == nil and self.c[f] == nil then want[#want + 1] = f end
    end
    if #want == 0 then return end
    local vals = redis.call('HMGET', self.key, unpack(want))
    for i, f in ipairs(want) do self.c[f] = vals[i] end
end

-- Reads the records seq .. seq + n - 1 that are not cached yet, in one call.
function Sale:prefetch(seq, n)
    local fields, seqs = {}, {}
    for s = seq, seq + n - 1 do
        if s < self.n and self.r[s] == nil and self.c[num(s)] == nil then
            fields[#fields + 1] = num(s)
            seqs[#seqs + 1] = s
        end
    end
    if #fields == 0 then return end
    local vals = redis.call('HMGET', self.key, unpack(fields))
    for i, f in ipairs(fields) do self.c[f] = vals[i] end
end

function Sale:rec(seq)
    local r = self.r[seq]
    if r == nil then
        local s = self:get(num(seq))
        if not s then return nil end
        r = rec_parse(s, seq)
        self.r[seq] = r
    end
    return r
end

function Sale:touch(r) self.rd[r.seq] = r end

-- Generated ids (docs/commands.md, "Reservation ids"): `<tag>-<seq>-<mac>`,
-- mac the first 16 hex digits of SHA-1(k .. '-' .. tag .. '-' .. seq) under
-- the sale's secret id key `k`, so one id does not tell its neighbours'
-- (the module uses another mac: ids are opaque). A sale without `k` (made
-- by an older library) keeps `<tag>-<seq>`.
local function id_mac(k, tag, seq) return string.sub(redis.sha1hex(k .. '-' .. tag .. '-' .. seq), 1, 16) end

function Sale:idk() return self:get('k') end

function Sale:gen_id(seq)
    local k = self:idk()
    if k then return self.tag .. '-' .. num(seq) .. '-' .. id_mac(k, self.tag, num(seq)) end
    return self.tag .. '-' .. num(seq)
end

function Sale:id_of(r) return r.id or self:gen_id(r.seq) end

-- The seq of generated id `id` (its mac checked), or nil.
function Sale:parse_generated(id)
    if #id < 10 or string.byte(id, 9) ~= 45 or string.sub(id, 1, 8) ~= self.tag then return nil end
    local d, mac = string.sub(id, 10), nil
    local k = self:idk()
    if k then
        d, mac = d:match('^(%d+)%-(%x+)$')
        if not d or #mac ~= 16 then return nil end
    end
    if #d > 10 or string.find(d, '[^0-9]') or (#d ~= 1 and string.byte(d, 1) == 48) then return nil end
    local seq = tonumber(d)
    if seq >= self.n then return nil end
    if k and mac ~= id_mac(k, self.tag, d) then return nil end
    return seq
end

-- The reservation with id `id` (sale.rs find): a generated id is parsed,
-- a client id is looked up.
function Sale:find(id)
    local seq = self:parse_generated(id)
    if seq then
        local r = self:rec(seq)
        if r and not r.id then return r end
    end
    if self.ci > 0 then
        local seq = self:get('i:' .. id)
        if seq then return self:rec(tonumber(seq)) end
    end
    return nil
end

-- Bucket i's field <prefix><i> as a number, read once (`cache`: bk or al).
function Sale:bucket_field(prefix, cache, i)
    local v = cache[i]
    if v == nil then
        v = tonumber(self:get(prefix .. num(i)))
        cache[i] = v
    end
    return v
end

function Sale:bucket(i) return self:bucket_field('b:', self.bk, i) end
function Sale:alloc(i) return self:bucket_field('a:', self.al, i) end

function Sale:set_bucket(i, v)
    self.bk[i] = v
    self.bd[i] = true
end

-- Reads the fields <prefix><i> of every bucket i not in `cache` yet into
-- it (numbers), 1,000 to an HMGET.
function Sale:fill_buckets(prefix, cache)
    local fields, want = {}, {}
    for i = 0, self.shards - 1 do
        if cache[i] == nil then
            fields[#fields + 1] = prefix .. num(i)
            want[#want + 1] = i
        end
    end
    for s = 1, #fields, 1000 do
        local vals = redis.call('HMGET', self.key, unpack(fields, s, math.min(s + 999, #fields)))
        for j, v in ipairs(vals) do cache[want[s + j - 1]] = tonumber(v) end
    end
end

-- Every bucket's remaining units, 0-based, in one call.
function Sale:all_buckets()
    self:fill_buckets('b:', self.bk)
    local out = {}
    for i = 0, self.shards - 1 do out[i] = self.bk[i] end
    return out
end

-- Every bucket's allocation (into self.al).
function Sale:all_allocs() self:fill_buckets('a:', self.al) end

-- Plans taking qty from `home`, then the other buckets in order
-- (buckets.rs plan_take); nil when they do not hold it.
function Sale:plan_take(home, qty)
    local left = self:bucket(home)
    if left >= qty then return {{home, qty}} end
    self:all_buckets()
    local need, takes = qty, {}
    for step = 0, self.shards - 1 do
        if need == 0 then break end
        local b = (home + step) % self.shards
        local got = math.min(self.bk[b], need)
        if got > 0 then
            takes[#takes + 1] = {b, got}
            need = need - got
        end
    end
    if need > 0 then return nil end
    return takes
end

function Sale:take(takes)
    for _, t in ipairs(takes) do self:set_bucket(t[1], self:bucket(t[1]) - t[2]) end
end

-- Units back to the buckets they came from, each capped at its allocation.
function Sale:give_back(takes)
    local given = 0
    for _, t in ipairs(takes) do
        local b = t[1]
        local left = self:bucket(b)
        local back = math.min(t[2], self:alloc(b) - left)
        self:set_bucket(b, left + back)
        given = given + back
    end
    return given
end

function Sale:writes_stream() return self.stream ~= nil and self.owner == self.key end

-- The keys, after the sale key, that calls on this sale touch (seckill_keys).
-- Not <key>:secret: only INIT and DRAW touch it and declare it, so a role
-- whose ACL keeps it from the secret (the shop's) still enters and settles.
function Sale:other_keys()
    local out = {}
    if self:writes_stream() then out[1] = self.stream end
    if self.draw then
        for _, k in ipairs({self.lkey, self.pkey, self.wkey}) do out[#out + 1] = k end
    end
    return out
end

-- Refuses the call (before any write) unless it declared what `need` says
-- it touches (CALL above).
function Sale:check_declared(need)
    if need == 'e' then
        if self.draw then need_key(self.lkey) end
        return
    end
    if self:writes_stream() then need_key(self.stream) end
    if self.draw then
        if need == 'd' then need_key(self.key .. ':secret') end
        need_key(self.lkey)
        need_key(self.pkey)
        need_key(self.wkey)
    end
end

-- `via`: how a draw sale's winner got its reservation ('draw', 'waitlist').
function Sale:event(word, r, via)
    if self:writes_stream() then self.ev[#self.ev + 1] = {word, self:id_of(r), r.user, r.qty, via} end
end

------------------------------------------------------------------ buyers

-- u:<user> is "<head>:<qty>[:<loose>]": head the newest record of the
-- buyer's chain (empty when the chain is), qty the buyer's live units,
-- loose the newest of its live records kept out of the chain (retaken
-- records older than the head: confirmed, so they never leave again). Its
-- newest live record is the newer of head and loose.
local function parse_u(u)
    local head, q, loose = u:match('^(%d*):(%d+):?(%d*)$')
    return tonumber(head), tonumber(q), tonumber(loose)
end

local function fmt_u(head, q, loose)
    return (head and num(head) or '') .. ':' .. num(q) .. (loose and ':' .. num(loose) or '')
end

local function newest_live(head, loose)
    if head and (not loose or head > loose) then return head end
    return loose
end

-- Links a live record into its buyer's chain (newest first) and counts it.
function Sale:join_buyer(r)
    local uf = 'u:' .. r.user
    local u = self:get(uf)
    if not u then
        self:set(uf, num(r.seq) .. ':' .. num(r.qty))
        self.buyers = self.buyers + 1
        r.prev, r.next = nil, nil
        return
    end
    local head, q, loose = parse_u(u)
    local sum = q + r.qty
    if head and r.seq > head then
        local h = self:rec(head)
        h.next = r.seq
        self:touch(h)
    end
    if not head or r.seq > head then
        r.prev, r.next = head, nil
        self:set(uf, fmt_u(r.seq, sum, loose))
        return
    end
    -- An older record coming back (RECONCILE retake; confirmed, it never
    -- leaves again) stays out of the chain: finding its place there would
    -- walk the chain (50,000 reads for a buyer with 50,000 live records).
    -- u: keeps the newest such record, so LIMIT still names the newest live
    -- record after the chain's newer records leave.
    r.prev, r.next = nil, nil
    self:set(uf, fmt_u(head, sum, (loose and loose > r.seq) and loose or r.seq))
    if self.layout < LAYOUT_LOOSE then self.layout = self.layout + LAYOUT_LOOSE end
end

-- Unlinks a record that stops being live.
function Sale:leave_buyer(r)
    local uf = 'u:' .. r.user
    local head, q, loose = parse_u(self:get(uf))
    local older, newer = r.prev, r.next
    r.prev, r.next = nil, nil
    if not older and not newer then
        -- The chain's last record; the buyer stays while it has loose ones.
        if loose then
            self:set(uf, fmt_u(nil, q - r.qty, loose))
        else
            self:set(uf, false)
            self.buyers = self.buyers - 1
        end
        return
    end
    if head == r.seq then
        local o = self:rec(older)
        o.next = nil
        self:touch(o)
        self:set(uf, fmt_u(older, q - r.qty, loose))
    else
        local nw = self:rec(newer)
        nw.prev = older
        self:touch(nw)
        if older then
            local o = self:rec(older)
            o.next = newer
            self:touch(o)
        end
        self:set(uf, fmt_u(head, q - r.qty, loose))
    end
end

----------------------------------------------------------- state changes

-- RELEASE (cause 'r') or hold expiry (cause 'x') of a pending record.
function Sale:release(r, cause)
    local takes = takes_parse(r.takes, r.qty)
    local was_hold = r.st == 'P'
    self:leave_buyer(r)
    set_state(r, cause)
    r.takes = ''
    self.rem = self.rem + self:give_back(takes)
    self.pend = self.pend - r.qty
    self.rel = self.rel + r.qty
    if cause == 'x' then self.exp = self.exp + r.qty end
    if was_hold then self.hn = self.hn - 1 end
    self:touch(r)
    self:event(cause == 'x' and 'expired' or 'released', r)
end

function Sale:confirm(r)
    if r.st == 'P' then self.hn = self.hn - 1 end
    set_state(r, 'c')
    self.pend = self.pend - r.qty
    self.conf = self.conf + r.qty
    self:touch(r)
    self:event('confirmed', r)
end

-- A released record takes stock again and becomes confirmed (RECONCILE APPLY).
function Sale:retake(r, takes)
    self:take(takes)
    self.rem = self.rem - r.qty
    self.rel = self.rel - r.qty
    if state_of(r) == 'x' then self.exp = self.exp - r.qty end
    self.conf = self.conf + r.qty
    set_state(r, 'c')
    r.takes = takes_fmt(takes)
    self:join_buyer(r)
    self:touch(r)
    self:event('confirmed', r)
end

-- A creation time never before the previous record's: creation order stays
-- deadline order when the clock steps back.
function Sale:stamp(now)
    if self.n > 0 and self.lc > now then return self.lc end
    return now
end

-- Adds a new record (RESERVE, or RECONCILE adopting an order).
function Sale:insert(id, user, qty, state, created, takes, via)
    local seq = self.n
    local hold = state == 'p' and self.hold > 0
    -- A client id written the way generated ids are, for this very record,
    -- is stored as generated (sale.rs insert_record).
    local client = string.sub(id, 1, 9) ~= self.tag .. '-' or id ~= self:gen_id(seq)
    local r = {seq = seq, st = hold and 'P' or state, qty = qty, off = created - self.t0, takes = takes_fmt(takes),
               prev = false, next = false, id = client and id or nil, user = user}
    r.prev, r.next = nil, nil
    if client then
        self:set('i:' .. id, num(seq))
        self.ci = self.ci + 1
    end
    self:take(takes)
    self.rem = self.rem - qty
    if state == 'p' then self.pend = self.pend + qty else self.conf = self.conf + qty end
    self.n = seq + 1
    self.lc = created
    self.r[seq] = r
    self:join_buyer(r)
    if hold then
        if self.hn == 0 then
            self.hc, self.hd = seq, created + self.hold
        end
        self.hn = self.hn + 1
    end
    self:touch(r)
    self:event(state == 'p' and 'reserved' or 'confirmed', r, via)
    return r
end

-- The generated id of the next record; when a client took that string as
-- its REQID, the smallest free `<that id>-<k>` with k at most ID_PROBES (the
-- module's choice), else `<that id>-<k>` with k drawn at random above it.
-- With an id key the next id cannot be known before it is made, so a
-- client takes it only by a 2^-64 chance: the probes run in practice
-- never, and a RESERVE costs at most the one HGET of the id itself (a
-- keyless sale of an older library keeps its old, guessable ids and
-- probes). Clients that took the id and its first ID_PROBES suffixes on
-- purpose cannot take the random ones ahead: the call stays one HMGET of
-- ID_PROBES candidates and one of ID_JUMPS, whatever they took (the module
-- goes on to the smallest free k: ids are opaque, docs/managed-redis.md).
-- (In a draw sale an entrant's REQID is taken too: it becomes the id of
-- that entrant's reservation if it wins.)
local ID_PROBES = 64   -- one HMGET: the whole RESERVE 0.15 to 0.2 ms on Redis 7.0.15 here
local ID_JUMPS = 3     -- random candidates, 48 bits each, from one SHA-1

-- (As `find(id) ~= nil`, without reading the record a client id names.)
function Sale:id_taken(id)
    if self.ci > 0 and self:get('i:' .. id) then return true end
    if self.draw and self:dstate().nreq > 0 and self:get('I:' .. id) then return true end
    local seq = self:parse_generated(id)
    local r = seq and self:rec(seq)
    return r and not r.id or false
end

-- The first free id of `cands`, their fields read in one call, or nil.
function Sale:first_free(cands)
    local fields, draw_ids = {}, self.draw and self:dstate().nreq > 0
    for _, cand in ipairs(cands) do
        fields[#fields + 1] = 'i:' .. cand
        if draw_ids then fields[#fields + 1] = 'I:' .. cand end
    end
    self:prefetch_fields(fields)
    for _, cand in ipairs(cands) do
        if not self:id_taken(cand) then return cand end
    end
    return nil
end

function Sale:generate_id()
    local id = self:gen_id(self.n)
    if (self.ci == 0 and not (self.draw and self:dstate().nreq > 0)) or not self:id_taken(id) then return id end
    local cands = {}
    for k = 1, ID_PROBES do cands[k] = id .. '-' .. num(k) end
    local free = self:first_free(cands)
    if free then return free end
    -- Taken on purpose: suffixes nobody can know before this call (TIME to
    -- the microsecond, a table's address, the sale's count).
    local t = redis.call('TIME')
    local h = redis.sha1hex(table.concat({id, t[1], t[2], tostring({}), num(self.ci)}, '\0'))
    cands = {}
    for j = 1, ID_JUMPS do
        cands[j] = id .. '-' .. num(ID_PROBES + 1 + tonumber(string.sub(h, 12 * j - 11, 12 * j), 16))
    end
    free = self:first_free(cands)
    if free then return free end
    fail('ERR no free reservation id: clients took the generated id and its suffixes as REQIDs')
end

-- Releases at most `max` holds that ran out at `now` (and at most
-- HOLDS_PER_CALL, or HOLDS_PER_CALL_STREAM with a stream), oldest first,
-- from the hold cursor `hc`; `hd` is the deadline of the hold there (0: not
-- known), so a call with nothing due reads nothing. Reads at most
-- SCAN_BUDGET records. Returns how many it released, and whether more are due.
function Sale:expire_due(now, max)
    if self.hold == 0 or self.hn == 0 or (self.hd > 0 and self.hd > now) then return 0, false end
    max = math.min(max, self:writes_stream() and HOLDS_PER_CALL_STREAM or HOLDS_PER_CALL)
    local released, at, batch, hd = 0, self.hc, 1, 0
    local stop = math.min(self.n, self.hc + SCAN_BUDGET)
    while released < max and at < stop do
        if self.r[at] == nil and self.c[num(at)] == nil then
            self:prefetch(at, math.min(batch, stop - at))
            batch = math.min(batch * 4, 64)
        end
        local r = self:rec(at)
        if r.st == 'P' then
            local deadline = self.t0 + r.off + self.hold
            if deadline > now then
                hd = deadline
                break
            end
            self:release(r, 'x')
            released = released + 1
            if self.hn == 0 then
                at = self.n
                break
            end
        end
        at = at + 1
    end
    if released > 0 or at ~= self.hc then
        self.hc, self.hd = at, hd
    else
        -- Only learned the deadline: kept if the call writes anyway.
        self.hd_hint = hd
    end
    -- More are due unless the walk stopped at a hold not due yet, reached
    -- the last reservation or left no hold.
    return released, self.hn > 0 and hd == 0 and at < self.n
end

-- After a change: the cursor moves off a record that is no longer a hold
-- (reading at most SCAN_BUDGET records; the next call goes on).
function Sale:fix_cursor()
    if self.hn == 0 then
        self.hc, self.hd = self.n, 0
        return
    end
    -- Only a record this call changed can have stopped being a hold.
    local r = self.r[self.hc]
    if r == nil or r.st == 'P' then return end
    local at, stop, batch = self.hc, math.min(self.n, self.hc + SCAN_BUDGET), 1
    self.hd = 0
    while at < stop do
        if self.r[at] == nil and self.c[num(at)] == nil then
            self:prefetch(at, math.min(batch, stop - at))
            batch = math.min(batch * 4, 64)
        end
        r = self:rec(at)
        if r.st == 'P' then
            self.hd = self.t0 + r.off + self.hold
            break
        end
        at = at + 1
    end
    self.hc = at
end

------------------------------------------------------------- draw sales

-- A draw sale (docs/draw-sales.md, draws v2) keeps beside the sale hash,
-- under its hash tag:
--   <key>:secret    string, the 32-byte secret (the seed), from INIT to the
--                   first DRAW: only that DRAW reads it, copies it into `d`
--                   (the reveal) and deletes the key. ENTER never reads it.
--   <key>:entrants  list of the users in the order they entered (ENTRANTS;
--                   LINDEX by arrival index)
--   <key>:perm      hash, the lazy Fisher-Yates permutation: field = a draw
--                   position not reached yet that a swap moved another
--                   arrival index to, value = that arrival index (sparse: a
--                   position without a field holds its own index; a field
--                   goes when its position is reached)
--   <key>:wait      zset of the entrants the walk looked at that are still
--                   waiting: score = draw position, member = user. The
--                   waitlist in draw order is this zset, then the positions
--                   the walk has not reached.
-- and in the sale hash:
--   d               the draw state, packed (draw_fmt)
--   E:<user>        "<qty>,<result>,<reqid>": result e (entered, or on the
--                   waitlist), d (won in the draw), p (promoted from it)
--   I:<reqid>       the entrant that gave REQID reqid
-- The draw order is the permutation a[0..n-1] of the arrival indices made by
-- Fisher-Yates driven by the draw seed S (uniform below), produced one
-- position at a time: `np` positions are done, a[np..] is still to come.
local DRAW_FORMAT = '<ddddddddd'
local DRAW_BYTES = 9 * 8
local ZERO32 = '\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0'   -- D0 (the library's top level has no `string`)
local TWO48 = 281474976710656
local SECRET_MISSING = "ERR the draw sale's secret key <key>:secret is missing or does not match its seed_commitment"

-- ne entrants, nd winners (draw and waitlist), dstock draw_stock (-1 before
-- the first DRAW), dleft what is left of it, np draw positions produced
-- (looked at), nreq entrants with a REQID; ws, wc, wend: the waitlist scan
-- (every waiting entrant up to position wc, or all of them when wend is 1,
-- asks for more than ws units; wc -1: none); then the commitment
-- SHA-256(secret) and the entrant digest D (32 bytes each), and as
-- <length>:<bytes> the secret and the draw seed S (both empty before the
-- first DRAW), the beacon's name and the value the first DRAW took.
local function draw_fmt(D)
    return struct.pack(DRAW_FORMAT, D.ne, D.nd, D.dstock, D.dleft, D.np, D.ws, D.nreq, D.wend, D.wc)
        .. D.commit .. D.digest .. lp(D.secret) .. lp(D.S) .. lp(D.beacon) .. lp(D.bvalue)
end

local function draw_parse(s)
    local x = {struct.unpack(DRAW_FORMAT, s)}
    local D = {ne = x[1], nd = x[2], dstock = x[3], dleft = x[4], np = x[5], ws = x[6], nreq = x[7], wend = x[8],
               wc = x[9], commit = string.sub(s, DRAW_BYTES + 1, DRAW_BYTES + 32),
               digest = string.sub(s, DRAW_BYTES + 33, DRAW_BYTES + 64), dirty = false}
    local strings = lp_strings(s, DRAW_BYTES + 65, 4)
    D.secret, D.S, D.beacon, D.bvalue = strings[1], strings[2], strings[3], strings[4]
    return D
end

function Sale:dstate()
    if self.D == nil then self.D = draw_parse(self:get('d')) end
    return self.D
end

local function entrant_parse(s)
    local qty, res, reqid = s:match('^(%d+),(%a),(.*)$')
    return tonumber(qty), res, reqid ~= '' and reqid or nil
end

local function entrant_fmt(qty, res, reqid) return num(qty) .. ',' .. res .. ',' .. (reqid or '') end

-- D(i+1) = SHA256(D(i) || u32be(len(user)) || user || u32be(qty)). (QTY is
-- at most LIMIT, which may pass 2^32: its low 32 bits, as a u32 cast.)
local function next_digest(d, user, qty)
    return sha256(d .. struct.pack('>I4', #user) .. user .. struct.pack('>I4', qty % 4294967296))
end

-- uniform(S, j, m): 0 <= result < m, from SHA1(S || u32be(j) || u32be(c)),
-- its first 6 bytes as a 48-bit number (exact in a double), rejecting
-- x >= floor(2^48 / m) * m.
local function uniform(S, j, m)
    local limit = idiv(TWO48, m) * m
    local c = 0
    while true do
        local x = tonumber(string.sub(redis.sha1hex(S .. struct.pack('>I4I4', j, c)), 1, 12), 16)
        if x < limit then return x - idiv(x, m) * m end
        c = c + 1
    end
end

local RESULT_WORD = {e = 'entered', d = 'drawn', p = 'promoted'}
local DRAW_MODE = {ok = 'draw'}   -- INFO's mode: a status word, as invariant

-- Whether the draw is complete: begun, and every entrant looked at or its
-- stock handed out.
function Sale:draw_complete()
    local D = self:dstate()
    return D.dstock >= 0 and (D.dleft <= 0 or D.np >= D.ne)
end

function Sale:left_to_draw()
    local D = self:dstate()
    if D.dstock < 0 then return self.rem > 0 and D.ne or 0 end
    if D.dleft > 0 then return D.ne - D.np end
    return 0
end

-- The permutation's fields (positions) not cached yet, in one HMGET.
-- P[pos]: the arrival index stored there, false when none (the position's
-- own); Pin[pos]: the field exists in <key>:perm.
function Sale:perm_read(positions)
    local fields, want = {}, {}
    for _, p in ipairs(positions) do
        if self.P[p] == nil and not want[p] then
            want[p] = true
            fields[#fields + 1] = num(p)
        end
    end
    for s = 1, #fields, 1000 do
        local last = math.min(s + 999, #fields)
        local vals = redis.call('HMGET', self.pkey, unpack(fields, s, last))
        for j = s, last do
            local v = vals[j - s + 1]
            local p = tonumber(fields[j])
            self.P[p] = v and tonumber(v) or false
            if v then self.Pin[p] = true end
        end
    end
end

-- The arrival indices at the next k draw positions (np, np+1, ...), without
-- producing them (perm_take does): the swap targets are computed and the
-- fields they touch read in one call.
function Sale:perm_peek(k)
    local D = self:dstate()
    local n, from = D.ne, D.np
    k = math.min(k, n - from)
    local T, need = self.T, {}
    for j = from, from + k - 1 do
        if T[j] == nil then T[j] = j + uniform(D.S, j, n - j) end
        need[#need + 1] = j
        need[#need + 1] = T[j]
    end
    self:perm_read(need)
    local ov, out = {}, {}
    local function at(p)
        local v = ov[p]
        if v == nil then v = self.P[p] end
        return v or p
    end
    for j = from, from + k - 1 do
        local t = T[j]
        local vj, vt = at(j), at(t)
        out[#out + 1] = vt
        if t ~= j then ov[t] = vj end
    end
    return out
end

-- Produces the next draw position: returns its arrival index (np + 1).
function Sale:perm_take()
    local D = self:dstate()
    local j = D.np
    local t = self.T[j]
    if t == nil then
        t = j + uniform(D.S, j, D.ne - j)
        self.T[j] = t
    end
    self:perm_read({j, t})
    local vj = self.P[j] or j
    local vt = vj
    if t ~= j then
        vt = self.P[t] or t
        self.P[t] = vj
        self.Pw[t] = vj
    end
    self.P[j] = false
    -- Position j is done: its field goes (if it was stored at all).
    if self.Pin[j] then self.Pw[j] = false else self.Pw[j] = nil end
    D.np, D.dirty = j + 1, true
    return vt
end

-- The users at the next k draw positions (k > 0), their entrant records
-- (and buyers, which a win reads) fetched.
function Sale:peek_users(k)
    local idx = self:perm_peek(k)
    local users = {}
    for i, a in ipairs(idx) do
        local u = redis.call('LINDEX', self.lkey, a)
        if not u then fail("ERR the draw sale's entrants list <key>:entrants is shorter than its entrant count") end
        users[i] = u
    end
    self:prefetch_entrants(users)
    return users
end

-- Reads the users' entrant records (and their buyers, which a win reads)
-- not cached yet, in one call.
function Sale:prefetch_entrants(users)
    local fields = {}
    for _, user in ipairs(users) do
        for _, f in ipairs({'E:' .. user, 'u:' .. user}) do
            if self.c[f] == nil and self.w[f] == nil then fields[#fields + 1] = f end
        end
    end
    for s = 1, #fields, 1000 do
        local last = math.min(s + 999, #fields)
        local vals = redis.call('HMGET', self.key, unpack(fields, s, last))
        for j = s, last do self.c[fields[j]] = vals[j - s + 1] end
    end
end

-- An entrant the walk looked at stays waiting at its draw position; a
-- waiting entrant leaves the waitlist (written by flush).
function Sale:wait_add(pos, user)
    self.wadd[#self.wadd + 1] = {pos, user}
    self.wnew[user] = #self.wadd
end

function Sale:wait_remove(user)
    local i = self.wnew[user]
    if i then
        self.wadd[i] = false
        self.wnew[user] = nil
    else
        self.wrem[#self.wrem + 1] = user
    end
end

-- The entrant `user` becomes a pending reservation (`via` draw or
-- waitlist) when its QTY fits `left` and the stock: returns its QTY, or nil
-- (it stays waiting).
function Sale:win(user, left, via, now)
    local qty, _, reqid = entrant_parse(self:get('E:' .. user))
    if qty > left or qty > self.rem then return nil end
    local takes = self:plan_take(home_of(user, self.shards), qty)
    if not takes then return nil end
    local id = reqid
    -- (A REQID that a reservation of this sale already has, as one RECONCILE
    -- APPLY adopted before the draw: the winner gets a generated id.)
    if not id or (self.ci > 0 and self:find(id)) then id = self:generate_id() end
    self:insert(id, user, qty, 'p', self:stamp(now), takes, via)
    self:set('E:' .. user, entrant_fmt(qty, via == 'draw' and 'd' or 'p', reqid))
    local D = self:dstate()
    D.nd = D.nd + 1
    D.dirty = true
    return qty
end

-- One DRAW call's work: at most `count` winners, 4 x count entrants looked
-- at (DRAW_LOOK_MAX at most), in draw order from position np. Returns the
-- winners made.
function Sale:draw_step(count, now)
    local D = self:dstate()
    local made, budget = 0, math.min(4 * count, DRAW_LOOK_MAX)
    while made < count and budget > 0 and D.dleft > 0 and D.np < D.ne do
        local users = self:peek_users(math.min(budget, count - made + 16, D.ne - D.np))
        for _, user in ipairs(users) do
            local pos = D.np
            self:perm_take()
            budget = budget - 1
            local got = self:win(user, D.dleft, 'draw', now)
            if got then
                D.dleft = D.dleft - got
                made = made + 1
            else
                self:wait_add(pos, user)
            end
            if D.dleft <= 0 or made == count then break end
        end
    end
    return made
end

-- Once the draw is complete, units that came back go to the first waiting
-- entrants in draw order whose QTY fits: the zset <key>:wait (what is
-- stored, then what this call's draw added, all at later positions), then
-- the positions the walk has not reached. At most PROMOTE_MAX promotions and
-- PROMOTE_SCAN entrants looked at per call, PROMOTE_REACH of them at
-- positions not reached yet (the next call goes on).
function Sale:promote()
    if self.rem <= 0 then return end
    local D = self:dstate()
    if D.ne - D.nd <= 0 or not self:draw_complete() or self:fenced() then return end
    local after = -1   -- the scan looks at the positions after this one
    if self.rem <= D.ws then
        if D.wend == 1 then return end
        after = D.wc
    end
    local now = now_ms()
    local budget, promoted, last, halt = PROMOTE_SCAN, 0, after, false
    -- Looks at one waiting entrant: whether it won, whether the scan stops there.
    local function look(pos, user, waiting)
        budget, last = budget - 1, pos
        if self:win(user, self.rem, 'waitlist', now) then
            promoted = promoted + 1
            if waiting then self:wait_remove(user) end
            return true, promoted == PROMOTE_MAX or self.rem <= 0
        end
        return false, false
    end
    -- Whether this call's draw added a waiting entrant after position p.
    local function added_after(p)
        for _, e in ipairs(self.wadd) do
            if e and e[1] > p then return true end
        end
        return false
    end
    -- What <key>:wait holds, read 64 entrants at first (a promotion often
    -- ends the scan early), then more at a time.
    local stored_done, chunk = false, 64
    while not halt and budget > 0 do
        local n = math.min(budget, chunk)
        local got = redis.call('ZRANGEBYSCORE', self.wkey, last >= 0 and '(' .. num(last) or '-inf', '+inf',
            'WITHSCORES', 'LIMIT', 0, n)
        local users, positions = {}, {}
        for i = 1, #got, 2 do
            users[#users + 1] = got[i]
            positions[#positions + 1] = tonumber(got[i + 1])
        end
        self:prefetch_entrants(users)
        for i, user in ipairs(users) do
            local _, stop = look(positions[i], user, true)
            if stop then
                halt = true
                if i < #users then n = -1 end   -- (stored entrants left)
                break
            end
        end
        if #users < n then stored_done = true end
        if #users < n or halt then break end
        chunk = chunk * 4
    end
    -- What this call's draw added to it.
    if not halt and stored_done then
        for _, e in ipairs(self.wadd) do
            if e and e[1] > last then
                if budget == 0 then break end
                local _, stop = look(e[1], e[2], true)
                if stop then
                    halt = true
                    break
                end
            end
        end
    end
    -- The positions the walk has not reached.
    if not halt and stored_done and not added_after(last) then
        local reach = PROMOTE_REACH
        while not halt and budget > 0 and reach > 0 and D.np < D.ne do
            local users_ = self:peek_users(math.min(budget, reach, D.ne - D.np, 64))
            reach = reach - #users_
            for _, user in ipairs(users_) do
                local pos = D.np
                self:perm_take()
                local won, stop = look(pos, user, false)
                if not won then self:wait_add(pos, user) end
                if stop then
                    halt = true
                    break
                end
            end
        end
    end
    local all = stored_done and not added_after(last) and D.np >= D.ne
    D.ws, D.wc, D.wend, D.dirty = self.rem, last, all and 1 or 0, true
end

-- The draw fields INFO and RECONCILE add (after the report's own).
function Sale:draw_report(out)
    local D = self:dstate()
    local ltd = self:left_to_draw()
    for _, v in ipairs({'mode', DRAW_MODE, 'entrants', D.ne, 'drawn', D.nd, 'left_to_draw', ltd,
                        'waitlist', D.ne - D.nd - ltd, 'draw_stock', D.dstock >= 0 and D.dstock or false,
                        'seed_commitment', tohex(D.commit),
                        'seed', D.secret and tohex(D.secret) or false,
                        'entrants_digest', tohex(D.digest),
                        'beacon', D.beacon or false,
                        'beacon_value', D.bvalue or false,
                        'draw_seed', D.S and tohex(D.S) or false}) do
        out[#out + 1] = v
    end
    return out
end

-- 32 bytes for a new draw's seed. A function has no OS random source and
-- its math.random is seeded the same on every server start (docs/
-- managed-redis.md, "The draw's secret"): this hashes what the server can
-- see that a client cannot predict, the server's run_id (160 bits from
-- /dev/urandom at start), the address of a new Lua table (ASLR), the CPU
-- clock where os.clock exists, TIME to the microsecond, the counters of
-- INFO, with the key and the previous round's seed.
local function fresh_seed(key, old)
    local t = redis.call('TIME')
    local parts = {t[1], t[2], tostring({}), tostring(math.random()), key, old or ''}
    local ok, clock = pcall(function() return string.format('%.9f', os.clock()) end)
    if ok then parts[#parts + 1] = clock end
    -- (An ACL refusal cannot be caught inside a function: ask first.)
    if redis.acl_check_cmd('INFO') then parts[#parts + 1] = redis.call('INFO') end
    t = redis.call('TIME')
    parts[#parts + 1] = t[2]
    return sha256(table.concat(parts, '\0'))
end

-- A draw sale's changes beside its hash: the waitlist zset, the
-- permutation's fields, and the secret key the first DRAW revealed.
function Sale:flush_draw()
    local add, rem = {}, self.wrem
    for _, e in ipairs(self.wadd) do
        if e then
            add[#add + 1] = num(e[1])
            add[#add + 1] = e[2]
        end
    end
    for s = 1, #add, 2000 do redis.call('ZADD', self.wkey, unpack(add, s, math.min(s + 1999, #add))) end
    for s = 1, #rem, 1000 do redis.call('ZREM', self.wkey, unpack(rem, s, math.min(s + 999, #rem))) end
    local set, del = {}, {}
    for p, v in pairs(self.Pw) do
        if v then
            set[#set + 1] = num(p)
            set[#set + 1] = num(v)
        else
            del[#del + 1] = num(p)
        end
    end
    for s = 1, #set, 2000 do redis.call('HSET', self.pkey, unpack(set, s, math.min(s + 1999, #set))) end
    for s = 1, #del, 1000 do redis.call('HDEL', self.pkey, unpack(del, s, math.min(s + 999, #del))) end
    if self.revealed then redis.call('DEL', self.key .. ':secret') end
end

-- Writes the call's changes: stream entries first (the one step that can
-- fail, on a STREAM key of another type or without permission: then
-- nothing is written), then the hash in one HSET (and one HDEL), and a
-- draw sale's other keys.
-- A STREAM key must be empty or a stream, and writable by the caller; in
-- the module's order (it opens the key, then asks the ACL): the type first.
local STREAM_NOPERM = "NOPERM this user has no permission to write the sale's STREAM key"
-- (The key's write permission itself the server checked: a call declares
-- the stream among its keys.)
local function check_stream_type(skey)
    if not redis.acl_check_cmd('TYPE', skey) then fail(STREAM_NOPERM) end
    local t = redis.call('TYPE', skey)
    t = type(t) == 'table' and t.ok or t
    if t ~= 'none' and t ~= 'stream' then fail('ERR the STREAM key holds a value that is not a stream') end
end
local function check_stream(skey)
    check_stream_type(skey)
    if not redis.acl_check_cmd('XADD', skey, '*', 'event', 'x') then fail(STREAM_NOPERM) end
end

-- The caller may not XADD to the stream: the error the module gives.
local function stream_refused(skey)
    check_stream(skey)
    fail(STREAM_NOPERM)
end

function Sale:flush()
    if self.D and self.D.dirty then self.w.d = draw_fmt(self.D) end
    local changed = next(self.rd) ~= nil or next(self.w) ~= nil or next(self.bd) ~= nil or meta_changed(self)
        or self.new_fence
    if not changed then return false end
    if self.hd_hint then self.hd = self.hd_hint end
    self:fix_cursor()
    -- An ACL refusal inside a function cannot be caught: ask first.
    if #self.ev > 0 and not redis.acl_check_cmd('XADD', self.stream, '*', 'event', 'x') then
        stream_refused(self.stream)
    end
    for i, e in ipairs(self.ev) do
        local args = {self.stream}
        if self.maxlen then
            args[2], args[3], args[4] = 'MAXLEN', '~', self.maxlen
        end
        args[#args + 1] = '*'
        for _, v in ipairs({'event', e[1], 'rid', e[2], 'user', e[3], 'qty', num(e[4])}) do args[#args + 1] = v end
        if e[5] then
            args[#args + 1] = 'via'
            args[#args + 1] = e[5]
        end
        if i == 1 then
            local ok, err = pcall(redis.call, 'XADD', unpack(args))
            if not ok then
                err = type(err) == 'table' and (err.err or '') or tostring(err)
                if string.find(err, 'WRONGTYPE', 1, true) then fail('ERR the STREAM key holds a value that is not a stream') end
                if string.find(err, 'NOPERM', 1, true) or string.find(err, 'permission', 1, true)
                    or string.find(err, "can't access", 1, true) then
                    fail("NOPERM this user has no permission to write the sale's STREAM key")
                end
                fail(err)
            end
        else
            redis.call('XADD', unpack(args))
        end
    end
    local set, del = {}, {}
    for f, v in pairs(self.w) do
        if v then
            set[#set + 1] = f
            set[#set + 1] = v
        else
            del[#del + 1] = f
        end
    end
    for seq, r in pairs(self.rd) do
        set[#set + 1] = num(seq)
        set[#set + 1] = rec_fmt(r)
    end
    -- A one-bucket sale's bucket is `rem`, stored once in `m` (a b:0 that
    -- library 1.0.0 wrote goes with this write).
    if self.shards > 1 then
        for i in pairs(self.bd) do
            set[#set + 1] = 'b:' .. num(i)
            set[#set + 1] = num(self.bk[i])
        end
    elseif self.stale_b0 then
        del[#del + 1] = 'b:0'
    end
    if meta_changed(self) or self.new_fence then
        set[#set + 1] = 'm'
        set[#set + 1] = meta_fmt(self)
    end
    if self.draw then self:flush_draw() end
    for s = 1, #set, 2000 do redis.call('HSET', self.key, unpack(set, s, math.min(s + 1999, #set))) end
    for s = 1, #del, 1000 do redis.call('HDEL', self.key, unpack(del, s, math.min(s + 999, #del))) end
    return true
end

-- Sold-out and restock signals: the module's keyspace events
-- seckill.soldout / seckill.restock, published on seckill:events:<key>.
local function stock_edge(key, before, after)
    if before > 0 and after == 0 then
        redis.call('PUBLISH', CHANNEL .. key, 'seckill.soldout')
    elseif before == 0 and after > 0 then
        redis.call('PUBLISH', CHANNEL .. key, 'seckill.restock')
    end
end

function Sale:finish(before)
    if self.draw then self:promote() end
    if self:flush() then stock_edge(self.key, before, self.rem) end
end

------------------------------------------------------------------ report

-- Field/value pairs in the module's order (a flat array: Lua tables are
-- unordered, so a RESP3 map could not keep the order; see the docs): a
-- draw sale's fields, then a FENCE sale's `fence`, come last.
function Sale:report()
    local b = self:all_buckets()
    local shards, sum = {}, 0
    for i = 0, self.shards - 1 do
        shards[i + 1] = b[i]
        sum = sum + b[i]
    end
    local ok = sum == self.rem and self.rem + self.pend + self.conf == self.total + self.recv - self.sent
    local out = {'total', self.total, 'remaining', self.rem, 'pending', self.pend, 'confirmed', self.conf,
                 'released', self.rel, 'expired', self.exp, 'buyers', self.buyers, 'reservations', self.n,
                 'shards', shards, 'invariant', redis.status_reply(ok and 'ok' or 'broken')}
    if self.round then
        local list = self:get('peers') or ''
        local peers, fields, pos = {}, {}, 1
        while pos <= #list do
            local len, at = list:match('^(%d+):()', pos)
            len = tonumber(len)
            local p = string.sub(list, at, at + len - 1)
            peers[#peers + 1] = p
            fields[#fields + 1] = 'p:' .. p
            pos = at + len
        end
        local rows, sent_to = {}, {}
        for s = 1, #fields, 1000 do
            local vals = redis.call('HMGET', self.key, unpack(fields, s, math.min(s + 999, #fields)))
            for j, v in ipairs(vals) do
                local i = s + j - 1
                local cached = self.w[fields[i]]
                if cached then v = cached end
                local sent, recv, to = (v or '0:0'):match('^(%d+):(%d+):?(%x*)$')
                rows[i] = {peers[i], tonumber(sent), tonumber(recv)}
                if to ~= '' then sent_to[#sent_to + 1] = {peers[i], to} end
            end
        end
        for _, v in ipairs({'round', self.round, 'incarnation', self.tag, 'sent', self.sent, 'received', self.recv,
                            'peers', rows, 'sent_to', sent_to}) do
            out[#out + 1] = v
        end
    end
    if self.draw then self:draw_report(out) end
    if self.fence then
        out[#out + 1] = 'fence'
        out[#out + 1] = redis.status_reply(self:fenced() and 'fenced' or 'clear')
    end
    return out
end

---------------------------------------------------------------- commands

local function arity(name) fail("ERR wrong number of arguments for '" .. name .. "' command") end

-- The sale key: the first of the call's keys (the others are what
-- seckill_keys lists, checked when the sale is opened).
local function one_key(keys, name)
    if #keys < 1 then arity(name) end
    return keys[1]
end

local function status_id_count(st, id, n) return {redis.status_reply(st), id or false, n} end
local function status_count(st, n) return {redis.status_reply(st), n} end

-- Bytes as the module's JSON strings (serde_json over String::from_utf8_lossy):
-- each maximal invalid UTF-8 subpart becomes U+FFFD; `"` `\` \b \f \n \r \t
-- escaped, the other bytes below 0x20 as \u00xx; `/`, DEL and valid UTF-8 as is.
local JSON_ESC = {['"'] = '\\"', ['\\'] = '\\\\', ['\b'] = '\\b', ['\f'] = '\\f', ['\n'] = '\\n',
                  ['\r'] = '\\r', ['\t'] = '\\t'}
local JSON_ESC_FULL = false      -- (filled on first use: `string` is out of reach while the library loads)

local function utf8_lossy(s)
    if not string.find(s, '[\128-\255]') then return s end
    local byte, out, i, n, start = string.byte, {}, 1, #s, 1
    while i <= n do
        local b = byte(s, i)
        if b < 0x80 then
            i = i + 1
        else
            local need, lo, hi = 0, 0x80, 0xBF
            if b >= 0xC2 and b <= 0xDF then need = 1
            elseif b == 0xE0 then need, lo = 2, 0xA0
            elseif (b >= 0xE1 and b <= 0xEC) or b == 0xEE or b == 0xEF then need = 2
            elseif b == 0xED then need, hi = 2, 0x9F
            elseif b == 0xF0 then need, lo = 3, 0x90
            elseif b >= 0xF1 and b <= 0xF3 then need = 3
            elseif b == 0xF4 then need, hi = 3, 0x8F
            end
            local k = 0
            while k < need do
                local c = byte(s, i + 1 + k)
                if not c or c < (k == 0 and lo or 0x80) or c > (k == 0 and hi or 0xBF) then break end
                k = k + 1
            end
            if need > 0 and k == need then
                i = i + 1 + need
            else
                out[#out + 1] = string.sub(s, start, i - 1)
                out[#out + 1] = '\239\191\189'
                i = i + 1 + k
                start = i
            end
        end
    end
    out[#out + 1] = string.sub(s, start)
    return table.concat(out)
end

local function json_str(s)
    if not string.find(s, '[%z\1-\31"\\\128-\255]') then return '"' .. s .. '"' end
    if not JSON_ESC_FULL then
        for b = 0, 31 do
            local ch = string.char(b)
            if not JSON_ESC[ch] then JSON_ESC[ch] = string.format('\\u%04x', b) end
        end
        JSON_ESC_FULL = true
    end
    return '"' .. string.gsub(utf8_lossy(s), '[%z\1-\31"\\]', JSON_ESC) .. '"'
end

-- FORMAT JSON: a report (flat field/value pairs) as one JSON object, the
-- fields in the module's order, numbers as numbers, nested lists as arrays.
local function json_value(v)
    local t = type(v)
    if t == 'number' then return num(v) end
    if t == 'string' then return json_str(v) end
    if t == 'table' and v.ok then return json_str(v.ok) end
    if t == 'table' then
        local parts = {}
        for i, x in ipairs(v) do parts[i] = json_value(x) end
        return '[' .. table.concat(parts, ',') .. ']'
    end
    return 'null'
end

local function as_json(pairs_)
    local parts = {}
    for i = 1, #pairs_, 2 do parts[#parts + 1] = json_str(pairs_[i]) .. ':' .. json_value(pairs_[i + 1]) end
    return '{' .. table.concat(parts, ',') .. '}'
end

local function format_value(raw)
    if raw:upper() ~= 'JSON' then fail('ERR FORMAT must be JSON') end
    return 'json'
end

-- A trailing `FORMAT JSON` (INFO, GET): the arguments before it, and the
-- format (nil: RESP).
local function split_format(args)
    local n = #args
    if n >= 2 and args[n - 1]:upper() == 'FORMAT' then
        local format = format_value(args[n])
        local rest = {}
        for i = 1, n - 2 do rest[i] = args[i] end
        return rest, format
    end
    return args, nil
end

-- A report in the format asked for; nil (no sale, no reservation) stays nil.
local function reply_as(format, pairs_)
    if format and pairs_ then return as_json(pairs_) end
    return pairs_
end

-- The new round's tag: eight hex digits from the clock, the key and the
-- previous tag, so generated ids do not repeat across rounds.
local function new_tag(key, old)
    local t = redis.call('TIME')
    local sec, usec = tonumber(t[1]), tonumber(t[2])
    local h = bit.bxor(bit.tobit((sec % 65536) * 65536 + usec % 65536), bit.tobit(math.floor(usec / 65536) * 2654435))
    h = bit.bxor(h, bit.tobit(key_slot(key) * 40503 + #key))
    if old then h = bit.bxor(h, bit.tobit((tonumber(old, 16) or 0) + 0x9e3779b9)) end
    h = bit.bxor(h, bit.rshift(h, 15))
    h = bit.tobit(bit.band(h, 0xffff) * 0x2c1b + bit.band(bit.rshift(h, 16), 0xffff) * 0x3cd7 * 65536 % 4294967296)
    return bit.tohex(h)
end

-- A new sale's id key, 32 hex digits: SHA-1 of what the server can see
-- that a client cannot predict (the run_id in INFO, a table address, the
-- CPU clock, TIME to the microsecond), as fresh_seed does.
local function new_id_key(key)
    local t = redis.call('TIME')
    local parts = {t[1], t[2], tostring({}), tostring(math.random()), key}
    local ok, clock = pcall(function() return string.format('%.9f', os.clock()) end)
    if ok then parts[#parts + 1] = clock end
    -- (An ACL refusal cannot be caught inside a function: ask first; the
    -- question itself fails where INFO is renamed away.)
    local known, allowed = pcall(redis.acl_check_cmd, 'INFO', 'server')
    if known and allowed then parts[#parts + 1] = redis.call('INFO', 'server') end
    t = redis.call('TIME')
    parts[#parts + 1] = t[2]
    return string.sub(redis.sha1hex(table.concat(parts, '\0')), 1, 32)
end

local function cmd_init(keys, args)
    local key = one_key(keys, 'seckill.init')
    if #args < 1 then arity('seckill.init') end
    local total = parse_u64('TOTAL', args[1], 0, MAX_TOTAL)
    local c = {shards = 1, limit = 1, hold = 0, start = 0}
    local ttl, replace, stream, maxlen, round, peers, draw, fence, beacon
    local o = options(args, 2)
    for w, word in o:words() do
        if w == 'SHARDS' then
            c.shards = o:number('SHARDS', 1, MAX_SHARDS)
        elseif w == 'LIMIT' then
            c.limit = o:number('LIMIT', 1, MAX_TOTAL)
        elseif w == 'HOLD' then
            c.hold = o:number('HOLD', 0, MAX_TIME_MS)
        elseif w == 'START' then
            c.start = o:number('START', 0, MAX_TIME_MS)
        elseif w == 'END' then
            c.end_ = o:number('END', 1, MAX_TIME_MS)
        elseif w == 'TTL' then
            ttl = o:number('TTL', 1, MAX_TTL_S)
        elseif w == 'STREAM' then
            stream = o:once_value('STREAM')
            if o:peek_is('MAXLEN') then
                local _, digits = o:number('MAXLEN', 1, I64_MAX)
                maxlen = digits
            end
        elseif w == 'SPLIT' then
            round = o:once_value('SPLIT')
            local n = parse_u64('SPLIT peer count', o:value('SPLIT'), 1, MAX_PEERS)
            if o.p + n - 1 > #args then fail('ERR SPLIT peer count is more than the peers given') end
            peers = {}
            for i = o.p, o.p + n - 1 do peers[#peers + 1] = args[i] end
            o.p = o.p + n
            if #round < 1 or #round > MAX_ROUND then fail('ERR SPLIT round must be 1 to 64 bytes') end
            for _, p in ipairs(peers) do
                parse_id('SPLIT peer', p)
                if p == key then fail('ERR SPLIT peer must differ from the key: a key cannot send to itself') end
            end
            table.sort(peers, function(a, b) return bytecmp(a, b) < 0 end)
            for i = 2, #peers do
                if peers[i] == peers[i - 1] then fail('ERR SPLIT names a peer twice') end
            end
        elseif w == 'REPLACE' then
            replace = o:flag('REPLACE')
        elseif w == 'DRAW' then
            draw = o:flag('DRAW')
        elseif w == 'BEACON' then
            beacon = o:once_value('BEACON')
        elseif w == 'FENCE' then
            fence = o:flag('FENCE')
        else
            unknown_option(word)
        end
    end
    -- (In the module's order: START and END, BEACON, then DRAW's END.)
    if c.end_ and c.start >= c.end_ then fail('ERR START must be before END') end
    if stream and (#stream < 1 or #stream > MAX_ID) then fail('ERR STREAM key must be 1 to 256 bytes') end
    if beacon and not draw then fail('ERR BEACON needs DRAW') end
    if beacon and (#beacon < 1 or #beacon > 256) then fail('ERR BEACON name must be 1 to 256 bytes') end
    if draw and not c.end_ then fail('ERR DRAW needs END: the end of registration') end
    if stream then
        if stream == key then fail('ERR STREAM key must differ from the sale key') end
        if draw and (stream == key .. ':entrants' or stream == key .. ':perm' or stream == key .. ':wait'
                     or stream == key .. ':secret') then
            fail("ERR STREAM key must differ from the draw sale's keys <key>:entrants, <key>:perm, <key>:wait "
                .. 'and <key>:secret')
        end
        if key_slot(stream) ~= key_slot(key) then
            fail('ERR STREAM key must hash to the sale key\'s slot: give both one hash tag, as sale:{1001} and sale:{1001}:events')
        end
    end
    if not hash_tag(key) and redis.call('INFO', 'cluster'):match('cluster_enabled:1') then
        fail('ERR in a cluster the sale key needs a hash tag, as sale:{1001}: the library keeps a sale and its stream in one slot')
    end
    local before = open(key)
    if before and not replace then return redis.status_reply('EXISTS') end
    -- Declared: the new stream, and the draw keys of the new round or of
    -- the draw sale it replaces (deleted).
    if stream then need_key(stream) end
    if draw or (before and before.draw) then
        for _, k in ipairs({':secret', ':entrants', ':perm', ':wait'}) do need_key(key .. k) end
    end
    if stream then check_stream(stream) end
    -- (Read here, so an INFO refusal comes before any write.)
    local replid = fence and server_replid()
    local now = now_ms()
    local old_seed = before and before.draw and before:get('d')
    local secret = draw and fresh_seed(key, old_seed)
    local commit = secret and sha256(secret)
    -- A draw sale's INIT tells its stream what it committed to (first: the
    -- one write that can fail).
    if draw and stream then
        local args = {stream}
        if maxlen then args[2], args[3], args[4] = 'MAXLEN', '~', maxlen end
        for _, v in ipairs({'*', 'event', 'draw_committed', 'commitment', tohex(commit), 'beacon', beacon or ''}) do
            args[#args + 1] = v
        end
        redis.call('XADD', unpack(args))
    end
    if before then redis.call('UNLINK', key) end
    -- A draw's secret, arrival list, permutation and waitlist go with the
    -- round they belong to.
    if draw or (before and before.draw) then
        redis.call('UNLINK', key .. ':secret', key .. ':entrants', key .. ':perm', key .. ':wait')
    end
    local S = {total = total, shards = c.shards, limit = c.limit, hold = c.hold, start = c.start, end_ = c.end_,
               tag_n = tonumber(new_tag(key, before and before.tag), 16), n = 0, rem = total, pend = 0, conf = 0, rel = 0, exp = 0,
               buyers = 0, hc = 0, hn = 0, hd = 0, t0 = now, lc = now, ci = 0, sent = 0, recv = 0,
               stream = stream, owner = stream and key, maxlen = stream and maxlen, round = round,
               layout = (draw and LAYOUT_DRAW or LAYOUT) + (fence and LAYOUT_FENCE or 0), fence = replid}
    local f = {'m', meta_fmt(S), 'k', new_id_key(key)}
    if draw then
        f[5], f[6] = 'd', draw_fmt({ne = 0, nd = 0, dstock = -1, dleft = 0, np = 0, ws = -1, nreq = 0, wend = 0,
                                    wc = -1, commit = commit, digest = ZERO32, beacon = beacon})
    end
    local function add(...)
        for _, v in ipairs({...}) do f[#f + 1] = v end
    end
    if round then
        local list = {}
        for i, p in ipairs(peers) do
            list[i] = #p .. ':' .. p
            add('p:' .. p, '0:0')
        end
        add('peers', table.concat(list))
    end
    local base, extra = idiv(total, c.shards), total % c.shards
    for i = 0, c.shards - 1 do
        local a = num(base + (i < extra and 1 or 0))
        if c.shards > 1 then add('b:' .. num(i), a) end
        add('a:' .. num(i), a)
    end
    for s = 1, #f, 2000 do redis.call('HSET', key, unpack(f, s, math.min(s + 1999, #f))) end
    if secret then redis.call('SET', key .. ':secret', secret) end
    if ttl then
        redis.call('PEXPIREAT', key, num(now + ttl * 1000))
        if secret then redis.call('PEXPIREAT', key .. ':secret', num(now + ttl * 1000)) end
    end
    if before then stock_edge(key, before.rem, total) end
    return redis.status_reply('OK')
end

-- RESERVE's common case in three server calls (HMGET, TIME, HSET) and no
-- Sale object: one bucket, a buyer with no live units, no REQID the sale
-- knows, no due hold to release first. It makes exactly the change the
-- general path makes (tests/functions/test_differential.py holds both to
-- the module). Returns the reply, or nil and what it read when the general
-- path must decide.
local reserve_general   -- (below)
local RESERVED = {ok = 'RESERVED'}   -- a status reply, shared: the server only reads it

local function reserve_fast(key, user, qty, reqid)
    local uf, idf = 'u:' .. user, reqid and 'i:' .. reqid
    local v
    -- (Without a REQID, the id key `k` too: the id is made here.)
    if idf then v = redis.call('HMGET', key, 'm', uf, idf) else v = redis.call('HMGET', key, 'm', uf, 'k') end
    local m = v[1]
    if not m or v[2] or (reqid and v[3]) or #m < META_BYTES then return nil, v end
    local layout, total, shards, limit, hold, start, end_, tag_n, n, rem, pend, conf, rel, exp, buyers, hc, hn, hd, t0,
        lc, ci, sent, recv = struct.unpack(META_FORMAT, m)
    -- (kind: the layout without LAYOUT_LOOSE.)
    local kind = layout > LAYOUT_LOOSE and layout - LAYOUT_LOOSE or layout
    if (kind ~= LAYOUT and kind ~= LAYOUT + LAYOUT_FENCE) or shards ~= 1 or qty > limit then return nil, v end
    local tail = string.sub(m, META_BYTES + 1)
    -- (A FENCE sale's tail is never '0:0:0:0:'; it has a stream when its
    -- first length is not 0.)
    local stream, maxlen
    if tail ~= '0:0:0:0:' and (kind == LAYOUT or string.byte(tail, 1) ~= 48) then
        local strings = lp_strings(m, META_BYTES + 1, 3)
        if strings[1] and strings[2] == key then stream, maxlen = strings[1], strings[3] end
        if stream then need_key(stream) end
    end
    local tag = string.format('%08x', tag_n)
    if reqid and #reqid >= 10 and string.sub(reqid, 1, 9) == tag .. '-' then return nil, v end
    if not reqid and ci > 0 then return nil, v end
    -- A FENCE sale sells here only while its recorded id is the server's.
    if kind ~= LAYOUT and lp_strings(m, META_BYTES + 1, 5)[5] ~= server_replid() then return nil, v end
    local now = 0
    if rem >= qty or start > 0 or end_ >= 0 or hn > 0 then now = now_ms() end
    if hold > 0 and hn > 0 and (hd == 0 or hd <= now) then return nil, v end
    -- An answer that writes nothing checks the stream as the module does
    -- before every RESERVE (a RESERVED one finds out by writing to it).
    if stream and (now < start or (end_ >= 0 and now >= end_) or rem < qty) then check_stream_type(stream) end
    if now < start then return {redis.status_reply('NOT_STARTED'), false, rem} end
    if end_ >= 0 and now >= end_ then return {redis.status_reply('ENDED'), false, rem} end
    if rem < qty then return {redis.status_reply('SOLD_OUT'), false, rem} end
    local seq, qs = num(n), qty == 1 and '1' or num(qty)
    local id = reqid or (v[3] and (tag .. '-' .. seq .. '-' .. id_mac(v[3], tag, seq)) or (tag .. '-' .. seq))
    local created = (n > 0 and lc > now) and lc or now
    local client = reqid ~= nil
    local record = (hold > 0 and 'P' or 'p') .. qs .. ',' .. num(created - t0) .. ',0,,,'
        .. (client and (#id .. ',' .. id) or '0,') .. user
    if hold > 0 then
        if hn == 0 then hc, hd = n, created + hold end
        hn = hn + 1
    else
        hc, hd = n + 1, 0
    end
    if client then ci = ci + 1 end
    -- The stream, written first (an error there changes nothing).
    if stream then
        do
            if not redis.acl_check_cmd('XADD', stream, '*', 'event', 'x') then stream_refused(stream) end
            local ok, err
            if maxlen then
                ok, err = pcall(redis.call, 'XADD', stream, 'MAXLEN', '~', maxlen, '*', 'event', 'reserved', 'rid', id,
                    'user', user, 'qty', qs)
            else
                ok, err = pcall(redis.call, 'XADD', stream, '*', 'event', 'reserved', 'rid', id, 'user', user, 'qty', qs)
            end
            if not ok then
                err = type(err) == 'table' and (err.err or '') or tostring(err)
                if string.find(err, 'WRONGTYPE', 1, true) then fail('ERR the STREAM key holds a value that is not a stream') end
                fail(err)
            end
        end
    end
    local left = rem - qty
    local meta = struct.pack(META_FORMAT, layout, total, shards, limit, hold, start, end_, tag_n, n + 1, left,
        pend + qty, conf, rel, exp, buyers + 1, hc, hn, hd, t0, created, ci, sent, recv) .. tail
    if client then
        redis.call('HSET', key, 'm', meta, seq, record, uf, seq .. ':' .. qs, idf, seq)
    else
        redis.call('HSET', key, 'm', meta, seq, record, uf, seq .. ':' .. qs)
    end
    if left == 0 then redis.call('PUBLISH', CHANNEL .. key, 'seckill.soldout') end
    return {RESERVED, id, left}
end

-- `key user [QTY n] [REQID id]` (RESERVE, ENTER): key, user, qty, reqid.
local function key_user_qty_reqid(keys, args, name)
    local key = one_key(keys, name)
    if #args < 1 then arity(name) end
    local user = parse_id('user id', args[1])
    local qty, reqid = 1, nil
    local o = options(args, 2)
    for w, word in o:words() do
        if w == 'QTY' then
            qty = o:number('QTY', 1, MAX_TOTAL)
        elseif w == 'REQID' then
            reqid = parse_id('REQID', o:once_value('REQID'))
        else
            unknown_option(word)
        end
    end
    return key, user, qty, reqid
end

local function cmd_reserve(keys, args)
    -- The common call, RESERVE key user, skips the option parser.
    local user = args[1]
    if #args == 1 and #keys == 1 and #user >= 1 and #user <= MAX_ID then
        local fast, pre = reserve_fast(keys[1], user, 1, nil)
        if fast then return fast end
        return reserve_general(keys[1], user, 1, nil, pre)
    end
    local key, qty, reqid
    key, user, qty, reqid = key_user_qty_reqid(keys, args, 'seckill.reserve')
    local fast, pre = reserve_fast(key, user, qty, reqid)
    if fast then return fast end
    return reserve_general(key, user, qty, reqid, pre)
end

-- RESERVE when the fast path cannot decide; `pre` is what it read.
reserve_general = function(key, user, qty, reqid, pre)
    local S = open(key, 'u:' .. user, reqid and 'i:' .. reqid, pre)
    if not S then return status_id_count('NO_SALE', nil, 0) end
    if pre and not reqid then S.c.k = pre[3] end   -- the id key, read with the rest
    if S.draw then return status_id_count('DRAW', nil, S.rem) end
    if qty > S.limit then fail("ERR QTY is above the sale's LIMIT") end
    if S:fenced() then return status_id_count('FENCED', nil, S.rem) end
    local before = S.rem
    -- A sold-out sale without window or holds answers without the clock.
    local now = 0
    if S.rem >= qty or S.start > 0 or S.end_ or S.hn > 0 then now = now_ms() end
    S:expire_due(now, LAZY_CHUNK)
    local st, id
    if reqid and S:find(reqid) then
        st, id = 'DUPLICATE', reqid
    elseif now < S.start then
        st = 'NOT_STARTED'
    elseif S.end_ and now >= S.end_ then
        st = 'ENDED'
    else
        local u = S:get('u:' .. user)
        local head, held, loose = nil, 0, nil
        if u then head, held, loose = parse_u(u) end
        if held + qty > S.limit then
            st, id = 'LIMIT', S:id_of(S:rec(newest_live(head, loose)))
        elseif S.rem < qty then
            st = 'SOLD_OUT'
        else
            local takes = S:plan_take(home_of(user, S.shards), qty)
            if not takes then
                st = 'SOLD_OUT'
            else
                id = reqid or S:generate_id()
                S:insert(id, user, qty, 'p', S:stamp(now), takes)
                st = 'RESERVED'
            end
        end
    end
    -- (The module checks the stream before every RESERVE; here a call that
    -- appends to it finds out by writing, one that does not asks.)
    if #S.ev == 0 and S:writes_stream() then check_stream_type(S.stream) end
    S:finish(before)
    return status_id_count(st, id, S.rem)
end

-- RELEASE and CONFIRM: due holds first, then the reservation's fate.
local function settle(keys, args, name, decide)
    local key = one_key(keys, name)
    if #args ~= 1 then arity(name) end
    local rid = parse_id('reservation id', args[1])
    local S = open(key, 'i:' .. rid)
    if not S then return status_count('NOT_FOUND', 0) end
    local before = S.rem
    S:expire_due(now_ms(), LAZY_CHUNK)
    local r = S:find(rid)
    local st = decide(S, r)
    S:finish(before)
    return status_count(st, S.rem)
end

local function cmd_release(keys, args)
    return settle(keys, args, 'seckill.release', function(S, r)
        if not r then return 'NOT_FOUND' end
        local s = state_of(r)
        if s == 'c' then return 'CONFIRMED' end
        if s ~= 'p' then return 'ALREADY_RELEASED' end
        S:release(r, 'r')
        return 'RELEASED'
    end)
end

local function cmd_confirm(keys, args)
    return settle(keys, args, 'seckill.confirm', function(S, r)
        if not r then return 'NOT_FOUND' end
        local s = state_of(r)
        if s == 'c' then return 'ALREADY_CONFIRMED' end
        if s ~= 'p' then return 'RELEASED' end
        S:confirm(r)
        return 'CONFIRMED'
    end)
end

-- Whether reservation r is one the draw made: its user is an entrant that
-- won (drawn, or promoted from the waitlist) with its QTY. RECONCILE on a
-- draw sale takes stock for no other (docs/draw-sales.md).
local function draw_made(S, r)
    local e = r and S:get('E:' .. r.user)
    if not e then return false end
    local qty, res = entrant_parse(e)
    return res ~= 'e' and qty == r.qty
end

local function cmd_reconcile(keys, args)
    local key = one_key(keys, 'seckill.reconcile')
    local expire, apply, orders, format = false, false, nil, nil
    local o = options(args, 1)
    for w, word in o:words() do
        if w == 'EXPIRE' then
            expire = o:flag('EXPIRE')
        elseif w == 'APPLY' then
            apply = o:flag('APPLY')
        elseif w == 'FORMAT' then
            format = format_value(o:once_value('FORMAT'))
        elseif w == 'ORDERS' then
            local count, digits = o:number('ORDERS', 1, U64_MAX)
            if not count or count > MAX_ORDERS then
                fail('ERR ORDERS takes at most 1000 rows per call: send the ledger in chunks')
            end
            if count > math.floor(#args / 3) then fail('ERR ORDERS count is more than the rows given') end
            orders = {}
            for i = 1, count do
                local rid = parse_id('order reservation id', o:value('ORDERS'))
                local user = parse_id('order user id', o:value('ORDERS'))
                local qty = parse_u64('order qty', o:value('ORDERS'), 1, MAX_TOTAL)
                orders[i] = {rid, user, qty}
            end
        else
            unknown_option(word)
        end
    end
    if apply and not orders then fail('ERR APPLY needs ORDERS') end
    local S = open(key)
    if not S then return false end
    -- EXPIRE and APPLY may append to the stream: checked first, as the module does.
    if (expire or apply) and S:writes_stream() then check_stream_type(S.stream) end
    local now = now_ms()
    local before = S.rem
    if expire or apply then S:expire_due(now, LAZY_CHUNK) end
    local ok, pending, released, unknown, conflict = 0, {}, {}, {}, {}
    for _, row in ipairs(orders or {}) do
        local rid, user, qty = row[1], row[2], row[3]
        local r = S:find(rid)
        local s = r and state_of(r)
        if S.draw and s ~= 'c' and s ~= 'p' and not draw_made(S, r) then
            conflict[#conflict + 1] = rid
        elseif s == 'c' then
            ok = ok + 1
        elseif s == 'p' then
            pending[#pending + 1] = rid
            if apply then S:confirm(r) end
        elseif s then
            local takes = S.rem >= r.qty and S:plan_take(home_of(r.user, S.shards), r.qty)
            if not apply then
                released[#released + 1] = rid
            elseif takes then
                released[#released + 1] = rid
                S:retake(r, takes)
            else
                conflict[#conflict + 1] = rid
            end
        else
            local takes = S.rem >= qty and S:plan_take(home_of(user, S.shards), qty)
            if not apply then
                unknown[#unknown + 1] = rid
            elseif takes then
                unknown[#unknown + 1] = rid
                S:insert(rid, user, qty, 'c', S:stamp(now), takes)
            else
                conflict[#conflict + 1] = rid
            end
        end
    end
    S:finish(before)
    local out = S:report()
    if orders then
        for _, v in ipairs({'orders_ok', ok, 'orders_pending', #pending, 'orders_released', #released,
                            'orders_unknown', #unknown, 'orders_conflict', #conflict,
                            'orders_pending_ids', pending, 'orders_released_ids', released,
                            'orders_unknown_ids', unknown, 'orders_conflict_ids', conflict}) do
            out[#out + 1] = v
        end
    end
    return reply_as(format, out)
end

local function cmd_info(keys, args)
    local key = one_key(keys, 'seckill.info')
    local rest, format = split_format(args)
    if #rest ~= 0 then arity('seckill.info') end
    local S = open(key)
    if not S then return false end
    local out = S:report()
    return reply_as(format, out)
end

local function cmd_get(keys, args)
    local key = one_key(keys, 'seckill.get')
    local rest, format = split_format(args)
    if #rest ~= 1 then arity('seckill.get') end
    local rid = parse_id('reservation id', rest[1])
    local S = open(key)
    if not S then return false end
    local r = S:find(rid)
    if not r then return false end
    local created = S.t0 + r.off
    return reply_as(format, {'user', r.user, 'qty', r.qty, 'state', STATE_WORD[state_of(r)], 'created_ms', created,
                             'deadline_ms', has_deadline(r) and created + S.hold or 0})
end

local function parse_peer(key, raw)
    parse_id('peer', raw)
    if raw == key then fail('ERR peer must differ from the key: a key cannot send to itself') end
    return raw
end

local function parse_round(raw)
    if #raw < 1 or #raw > MAX_ROUND then fail('ERR ROUND must be 1 to 64 bytes') end
    return raw
end

-- A draw part that has begun drawing moves no stock: its stock was fixed
-- by the first DRAW, and a split draw's shares must stay what its entrants
-- imply (docs/split-sales.md).
local DRAWING = 'ERR the draw part has begun drawing: its stock moves no more'

local function has_begun_drawing(S) return S.draw and S:dstate().dstock >= 0 end

local ROUND_REQUIRED = 'ERR ROUND is required: the split sale\'s round, so a transfer from another round changes nothing'
local PEER_RECREATED = 'STALEPEER this key sent to another incarnation of the peer (it was deleted and re-created): '
    .. "nothing moves; INIT ... REPLACE the sale's keys in a new round"
local OTHER_INCARNATION = 'STALEPEER the total was sent to another incarnation of this key (it was deleted and '
    .. 're-created): nothing is credited'

-- A key's incarnation is its tag, drawn anew at every INIT: SEND names the
-- receiver's (TO) and records it with its counter, RECV names the one the
-- total was counted for, and a key credits only totals counted for itself.
local function parse_incarnation(raw)
    if #raw ~= 8 or string.find(raw, '[^0-9a-f]') then
        fail("ERR TO must be 8 lowercase hex digits: the receiving key's incarnation (INFO incarnation)")
    end
    return raw
end

-- Only a part of a split sale moves stock, only with a peer it declared,
-- only in its own round.
local function check_transfer(S, peer, round)
    if not S.round then fail('ERR the sale is not a part of a split sale (INIT ... SPLIT)') end
    if S.round ~= round then
        fail('STALEROUND the key is in another round of its split sale (an INIT ... REPLACE started it): reload the layout')
    end
    local c = S:get('p:' .. peer)
    if not c then fail("ERR the peer is not one of this part's declared peers") end
    local sent, recv, to = c:match('^(%d+):(%d+):?(%x*)$')
    return tonumber(sent), tonumber(recv), to ~= '' and to or nil
end

-- The lowest level L >= 1 with sum(max(0, r - L)) < qty over the buckets,
-- found from the sorted remainders (buckets.rs plan_send's level).
local function send_level(rems, n, qty)
    local sorted = {}
    for i = 0, n - 1 do sorted[#sorted + 1] = rems[i] end
    table.sort(sorted, function(a, b) return a > b end)
    local best, sum = nil, 0
    for k = 1, #sorted do
        sum = sum + sorted[k]
        local lo, hi = sorted[k + 1] or 0, sorted[k]
        -- Here the k fullest are above L: sum - k L < qty, L > (sum - qty) / k.
        local l = sum - qty < 0 and 0 or idiv(sum - qty, k) + 1
        if l < lo then l = lo end
        if l <= hi and (best == nil or l < best) then best = l end
    end
    return best or 0
end

-- The highest level L with sum(max(0, L - r)) <= qty (plan_credit's level).
local function credit_level(rems, n, qty)
    local sorted = {}
    for i = 0, n - 1 do sorted[#sorted + 1] = rems[i] end
    table.sort(sorted)
    local best, sum = 0, 0
    for k = 1, #sorted do
        sum = sum + sorted[k]
        local lo, hi = sorted[k], sorted[k + 1]
        -- Here the k emptiest are below L: k L - sum <= qty.
        local l = idiv(qty + sum, k)
        if hi and l > hi then l = hi end
        if l >= lo and l > best then best = l end
    end
    return best
end

local function cmd_send(keys, args)
    local key = one_key(keys, 'seckill.send')
    if #args < 2 then arity('seckill.send') end
    local peer = parse_peer(key, args[1])
    local qty = parse_u64('qty', args[2], 1, MAX_TOTAL)
    local min, tid, round, to = 1, nil, nil, nil
    local o = options(args, 3)
    for w, word in o:words() do
        if w == 'MIN' then
            min = o:number('MIN', 1, MAX_TOTAL)
        elseif w == 'TID' then
            tid = parse_id('TID', o:once_value('TID'))
        elseif w == 'ROUND' then
            round = parse_round(o:once_value('ROUND'))
        elseif w == 'TO' then
            to = parse_incarnation(o:once_value('TO'))
        else
            unknown_option(word)
        end
    end
    if not tid then fail('ERR TID is required: it makes a retried SEND take nothing more') end
    if not round then fail(ROUND_REQUIRED) end
    local S = open(key, 'p:' .. peer, 't:' .. tid)
    if not S then return false end
    local sent, recv, sent_to = check_transfer(S, peer, round)
    if to and sent_to and sent_to ~= to then fail(PEER_RECREATED) end
    if has_begun_drawing(S) and not S:get('t:' .. tid) then fail(DRAWING) end
    if S:fenced() then fail(FENCED) end
    local before = S.rem
    S:expire_due(now_ms(), LAZY_CHUNK)
    local taken = 0
    if not S:get('t:' .. tid) then
        local take = math.min(qty, S.rem)
        if take >= min and take > 0 then
            local rems = S:all_buckets()
            S:all_allocs()
            local level = send_level(rems, S.shards, take)
            local above = 0
            for i = 0, S.shards - 1 do above = above + math.max(0, rems[i] - level) end
            local extra = take - above
            for i = 0, S.shards - 1 do
                local r = rems[i]
                local one = (extra > 0 and r >= level and level > 0) and 1 or 0
                extra = extra - one
                local q = math.max(0, r - level) + one
                if q > 0 then
                    S:set_bucket(i, r - q)
                    S.al[i] = S.al[i] - q
                    S:set('a:' .. num(i), num(S.al[i]))
                end
            end
            S.rem = S.rem - take
            S.sent = S.sent + take
            sent = sent + take
            to = to or sent_to
            S:set('p:' .. peer, num(sent) .. ':' .. num(recv) .. (to and (':' .. to) or ''))
            S:set('t:' .. tid, '1')
            taken = take
        end
    end
    S:finish(before)
    return {taken, sent, S.rem}
end

local function cmd_recv(keys, args)
    local key = one_key(keys, 'seckill.recv')
    if #args < 2 then arity('seckill.recv') end
    local peer = parse_peer(key, args[1])
    local total_n, total_s = parse_u64('sent_total', args[2], 0, U64_MAX)
    local round, to
    -- `ROUND round TO incarnation`, in any order (args.rs parse_recv).
    for i = 3, #args, 2 do
        local word, value = args[i], args[i + 1]
        local w = word:upper()
        if value == nil then
            arity('seckill.recv')
        elseif w == 'ROUND' then
            if round then fail('ERR option ROUND given twice') end
            round = parse_round(value)
        elseif w == 'TO' then
            if to then fail('ERR option TO given twice') end
            to = parse_incarnation(value)
        else
            unknown_option(word)
        end
    end
    if not round then fail(ROUND_REQUIRED) end
    local S = open(key, 'p:' .. peer)
    if not S then return false end
    local sent, recv, sent_to = check_transfer(S, peer, round)
    if to and to ~= S.tag then fail(OTHER_INCARNATION) end
    -- A total the key cannot hold is refused before anything changes.
    local credit = total_n and math.max(0, total_n - recv)
    if has_begun_drawing(S) and (credit == nil or credit > 0) then fail(DRAWING) end
    if credit == nil or (credit > 0 and S.total + S.recv - S.sent + credit > MAX_TOTAL) then
        fail('ERR sent_total cannot be credited: the credit would take the sale past 10^15 units')
    end
    local before = S.rem
    S:expire_due(now_ms(), LAZY_CHUNK)
    if credit > 0 then
        local rems = S:all_buckets()
        S:all_allocs()
        local level = credit_level(rems, S.shards, credit)
        local below = 0
        for i = 0, S.shards - 1 do below = below + math.max(0, level - rems[i]) end
        local extra = credit - below
        for i = 0, S.shards - 1 do
            local r = rems[i]
            local one = (extra > 0 and r <= level) and 1 or 0
            extra = extra - one
            local q = math.max(0, level - r) + one
            if q > 0 then
                S:set_bucket(i, r + q)
                S.al[i] = S.al[i] + q
                S:set('a:' .. num(i), num(S.al[i]))
            end
        end
        S.rem = S.rem + credit
        S.recv = S.recv + credit
        recv = total_n
        S:set('p:' .. peer, num(sent) .. ':' .. num(recv) .. (sent_to and (':' .. sent_to) or ''))
    end
    S:finish(before)
    return {credit, recv, S.rem}
end

-- SECKILL.ENTER key user [QTY n] [REQID id] -> [status, entrants]
local function cmd_enter(keys, args)
    local key, user, qty, reqid = key_user_qty_reqid(keys, args, 'seckill.enter')
    local ef, rf = 'E:' .. user, reqid and 'I:' .. reqid
    local S = open(key, ef, rf)
    if not S then return status_count('NO_SALE', 0) end
    if not S.draw then fail(NOT_DRAW) end
    if qty > S.limit then fail("ERR QTY is above the sale's LIMIT") end
    if S:fenced() then return status_count('FENCED', S:dstate().ne) end
    local D = S:dstate()
    if S:get(ef) then return status_count('ALREADY_ENTERED', D.ne) end
    if rf and S:get(rf) then fail("ERR REQID is already another entrant's") end
    if reqid and S:find(reqid) then fail("ERR REQID is already a reservation's id") end
    if D.dstock >= 0 then return status_count('DRAWN', D.ne) end
    local now = now_ms()
    if now < S.start then return status_count('NOT_STARTED', D.ne) end
    if now >= S.end_ then return status_count('ENDED', D.ne) end
    redis.call('RPUSH', S.lkey, user)
    D.digest = next_digest(D.digest, user, qty)
    S:set(ef, entrant_fmt(qty, 'e', reqid))
    if rf then
        S:set(rf, user)
        D.nreq = D.nreq + 1
    end
    D.ne, D.dirty = D.ne + 1, true
    S:finish(S.rem)
    return status_count('ENTERED', D.ne)
end

-- `[COUNT n]`, the only option of ENTRANTS after its cursor.
local function count_option(args, pos, default, max)
    local count = default
    local o = options(args, pos)
    for w, word in o:words() do
        if w == 'COUNT' then
            count = o:number('COUNT', 1, max)
        else
            unknown_option(word)
        end
    end
    return count
end

-- SECKILL.DRAW key [COUNT n] [BEACON value] -> [drawn, remaining, left_to_draw]
local function cmd_draw(keys, args)
    local key = one_key(keys, 'seckill.draw')
    local count, bvalue = DRAW_COUNT, nil
    local o = options(args, 1)
    for w, word in o:words() do
        if w == 'COUNT' then
            count = o:number('COUNT', 1, DRAW_COUNT_MAX)
        elseif w == 'BEACON' then
            bvalue = o:once_value('BEACON')
        else
            unknown_option(word)
        end
    end
    local S = open(key)
    if not S then fail('ERR no such sale') end
    if not S.draw then fail(NOT_DRAW) end
    if S:fenced() then fail(FENCED) end
    local now = now_ms()
    if now < S.end_ then fail('ERR registration is open until END: DRAW runs after it') end
    local D = S:dstate()
    if bvalue and (#bvalue < 1 or #bvalue > 1024) then fail('ERR BEACON value must be 1 to 1024 bytes') end
    if D.beacon then
        if D.dstock < 0 and not bvalue then
            fail('ERR the sale declared a beacon: the first DRAW needs BEACON value')
        end
        if D.dstock >= 0 and bvalue and bvalue ~= D.bvalue then
            fail('ERR BEACON differs from the value the draw began with')
        end
    elseif bvalue then
        fail('ERR the sale declared no beacon')
    end
    local before = S.rem
    S:expire_due(now, LAZY_CHUNK)
    if D.dstock < 0 then
        -- The first DRAW: the stock it hands out; the secret read from its
        -- key (the only read of it) and revealed in `d`; the draw seed.
        local skey = key .. ':secret'
        -- (An ACL refusal inside a function cannot be caught: ask first.)
        if not redis.acl_check_cmd('GET', skey) then
            fail("NOPERM this user has no permission to read the draw sale's secret key <key>:secret")
        end
        local ok, secret = pcall(redis.call, 'GET', skey)
        if not ok or type(secret) ~= 'string' or #secret ~= 32 or sha256(secret) ~= D.commit then fail(SECRET_MISSING) end
        D.secret, D.bvalue = secret, D.beacon and bvalue or nil
        D.S = sha256(secret .. D.digest .. (D.bvalue or ''))
        D.dstock, D.dleft, D.dirty = S.rem, S.rem, true
        S.revealed = true
    end
    local made = S:draw_step(math.min(count, DRAW_CALL_MAX), now)
    S:finish(before)
    return {made, S.rem, S:left_to_draw()}
end

-- SECKILL.ENTRANTS key cursor [COUNT n] -> [next_cursor, [user, qty, result, ...]]
-- The cursor is the arrival index of the next entrant (0: from the start;
-- 0 back: done).
local function cmd_entrants(keys, args)
    local key = one_key(keys, 'seckill.entrants')
    if #args < 1 then arity('seckill.entrants') end
    local cursor = parse_u64('cursor', args[1], 0, U64_MAX)
    local count = count_option(args, 2, ENTRANTS_COUNT, ENTRANTS_MAX)
    local S = open(key)
    if not S then return {'0', {}} end
    if not S.draw then fail(NOT_DRAW) end
    local D = S:dstate()
    if not cursor or cursor >= D.ne then return {'0', {}} end
    local users = redis.call('LRANGE', S.lkey, cursor, cursor + count - 1)
    local out = {}
    if #users > 0 then
        local fields = {}
        for i, u in ipairs(users) do fields[i] = 'E:' .. u end
        local recs = redis.call('HMGET', key, unpack(fields))
        for i, u in ipairs(users) do
            local qty, res = entrant_parse(recs[i])
            out[#out + 1] = u
            out[#out + 1] = qty
            out[#out + 1] = RESULT_WORD[res]
        end
    end
    local nxt = cursor + #users
    return {nxt < D.ne and num(nxt) or '0', out}
end

-- FCALL seckill_expire n key [keys...] [count]: releases up to count
-- (default 128, at most 256) holds that ran out, oldest first. Replies
-- [released, more]: more is 1 while due holds remain (a worker calls again
-- at once), 0 when none is due.
local function cmd_expire(keys, args)
    local key = one_key(keys, 'seckill_expire')
    if #args > 1 then arity('seckill_expire') end
    local count = LAZY_CHUNK
    if args[1] then count = parse_u64('count', args[1], 1, EXPIRE_MAX) end
    local S = open(key)
    if not S then return {0, 0} end
    local before = S.rem
    local n, more = S:expire_due(now_ms(), count)
    S:finish(before)
    return {n, more and 1 or 0}
end

-- FCALL_RO seckill_keys 1 key: the keys, after the sale key, that calls on
-- this sale declare (Sale:other_keys); empty for a key that does not exist.
local function cmd_keys(keys, args)
    local key = one_key(keys, 'seckill_keys')
    if #args ~= 0 then arity('seckill_keys') end
    local S = open(key)
    if not S then return {} end
    return S:other_keys()
end

-- FCALL_RO seckill_stats n key [key ...]: INFO's counters summed over the
-- sales named (keys that are not sales are skipped; a cluster's caller
-- asks each slot's master for its own sales), plus how many were sales.
local STATS = {'reservations', 'n', 'total', 'total', 'remaining', 'rem', 'pending', 'pend', 'confirmed', 'conf',
               'released', 'rel', 'expired', 'exp', 'buyers', 'buyers', 'holds_pending', 'hn', 'sent', 'sent',
               'received', 'recv'}
local function cmd_stats(keys, args)
    if #args ~= 0 then arity('seckill_stats') end
    local sums = {sales = 0, fenced = 0, entrants = 0, drawn = 0}
    for i = 2, #STATS, 2 do sums[STATS[i]] = 0 end
    for _, key in ipairs(keys) do
        local ok, S = pcall(open, key)
        if ok and S then
            sums.sales = sums.sales + 1
            for i = 2, #STATS, 2 do sums[STATS[i]] = sums[STATS[i]] + S[STATS[i]] end
            if S:fenced() then sums.fenced = sums.fenced + 1 end
            if S.draw then
                local D = S:dstate()
                sums.entrants, sums.drawn = sums.entrants + D.ne, sums.drawn + D.nd
            end
        end
    end
    local out = {'sales', sums.sales}
    for i = 1, #STATS, 2 do
        out[#out + 1] = STATS[i]
        out[#out + 1] = sums[STATS[i + 1]]
    end
    for _, f in ipairs({'entrants', 'drawn', 'fenced'}) do
        out[#out + 1] = f
        out[#out + 1] = sums[f]
    end
    return out
end

-- SECKILL.UNFENCE key -> UNFENCED | NOT_FENCED | NO_SALE: a fenced sale
-- records the server's current replication id (in `m`, whose HSET carries
-- the id to replicas and the AOF). A write like any other, as the
-- module's: due holds first, then the waitlist gets the units that came
-- back while the sale was fenced. Anything else changes nothing.
local function cmd_unfence(keys, args)
    local key = one_key(keys, 'seckill.unfence')
    if #args ~= 0 then arity('seckill.unfence') end
    local S = open(key)
    if not S then return redis.status_reply('NO_SALE') end
    if not S:fenced() then return redis.status_reply('NOT_FENCED') end
    local before = S.rem
    S:expire_due(now_ms(), LAZY_CHUNK)
    S.fence, S.is_fenced, S.new_fence = S.server_id, false, true
    S:finish(before)
    return redis.status_reply('UNFENCED')
end

------------------------------------------------------------ registration

-- Runs a command: refusals and errors of the server become error replies
-- (nothing is written before the last step, so an error changes nothing).
local function entry(body, need)
    return function(keys, args)
        CALL.keys, CALL.need = keys, need
        local ok, res = pcall(body, keys, args)
        if ok then return res end
        if type(res) == 'table' then
            if res.seckill then return redis.error_reply(res.seckill) end
            if res.err then return redis.error_reply(res.err) end
        end
        res = tostring(res)
        if res:match('^%u[%u_]+ ') then return redis.error_reply(res) end
        return redis.error_reply('ERR seckill internal error: ' .. res)
    end
end

local function register(name, body, flags, need, description)
    redis.register_function{function_name = name, callback = entry(body, need), flags = flags,
                            description = description}
end

-- (need: what the function's calls declare besides the sale key; CALL.)
register('seckill_init', cmd_init, {}, nil, 'SECKILL.INIT key total [SHARDS n] [LIMIT q] [HOLD ms] [START ms] [END ms] [TTL s] [STREAM skey [MAXLEN n]] [SPLIT round n peer...] [REPLACE] [DRAW [BEACON name]] [FENCE]')
register('seckill_reserve', cmd_reserve, {}, 'w', 'SECKILL.RESERVE key user [QTY n] [REQID id]')
register('seckill_release', cmd_release, {}, 'w', 'SECKILL.RELEASE key rid')
register('seckill_confirm', cmd_confirm, {}, 'w', 'SECKILL.CONFIRM key rid')
register('seckill_reconcile', cmd_reconcile, {}, 'w', 'SECKILL.RECONCILE key [EXPIRE] [ORDERS count rid user qty ...] [APPLY]')
register('seckill_info', cmd_info, {'no-writes'}, nil, 'SECKILL.INFO key')
register('seckill_get', cmd_get, {'no-writes'}, nil, 'SECKILL.GET key rid')
register('seckill_send', cmd_send, {}, 'w', 'SECKILL.SEND key peer qty [MIN m] TID tid ROUND round')
register('seckill_recv', cmd_recv, {}, 'w', 'SECKILL.RECV key peer sent_total ROUND round')
register('seckill_enter', cmd_enter, {}, 'w', 'SECKILL.ENTER key user [QTY n] [REQID id]')
register('seckill_draw', cmd_draw, {}, 'd', 'SECKILL.DRAW key [COUNT n] [BEACON value]')
register('seckill_entrants', cmd_entrants, {'no-writes'}, 'e', 'SECKILL.ENTRANTS key cursor [COUNT n]')
register('seckill_unfence', cmd_unfence, {}, 'w', 'SECKILL.UNFENCE key')
register('seckill_expire', cmd_expire, {}, 'w', 'seckill_expire key [count]: releases up to count due holds; replies [released, more]')
register('seckill_keys', cmd_keys, {'no-writes'}, nil, 'seckill_keys key: the keys, after the sale key, that calls on this sale declare')
register('seckill_stats', cmd_stats, {'no-writes'}, nil, 'seckill_stats numkeys key...: the sales counters summed over the sales named')
register('seckill_version', function() return VERSION end, {'no-writes', 'allow-stale'}, nil, 'seckill library ' .. VERSION)
