-- The seckill metrics for redis_exporter's -script option (tested with
-- Debian 12's prometheus-redis-exporter 1.45). The exporter runs this with
-- EVAL on every scrape and turns each (name, value) pair of the reply into
-- redis_script_values{key="name"}; prometheus.yml's metric_relabel_configs
-- (in this folder) turn them into seckill_* series:
--
--   seckill_<counter>                  INFO seckill's counters (reserve_reserved, ...)
--   seckill_sale_<field>;sale=<key>    each sale's remaining, pending, confirmed, expired
--   seckill_sale_invariant_ok;sale=<key>  0, only for a sale whose invariant is broken
--   seckill_sale_fenced;sale=<key>     1, only for a FENCE sale that is fenced
--   seckill_exporter_sales             the sales reported
--   seckill_exporter_invariant_broken  the sales whose invariant is broken
--   seckill_exporter_fenced            the sales that are fenced
--
-- What a scrape costs (docs/monitoring.md): the script blocks the server
-- while it runs, so it reads every sale's numbers with the listing itself
-- (SECKILL.SALES ... WITHCOUNTS: six integers after each name, one call per
-- 1,000 sales) and sends 4 series per sale, plus one only for a sale in
-- trouble. total is remaining + pending + confirmed while the invariant
-- holds; released, buyers and reservations are in SECKILL.INFO only.
--
-- Stream backlog: a sale's report does not name its stream, so the script
-- cannot find it; the pipeline's endpoint (seckill.pipeline.metrics) exports
-- seckill_pipeline_stream_lag / _pending per sale and group from the
-- ledger's stream names. Set STREAM_SUFFIX (e.g. ':events') to have the
-- script read <sale><suffix> too: XINFO GROUPS costs about 7 us per sale more.
--
-- The sales come from SECKILL.SALES (the module's own list), never from a
-- SCAN: the cost grows with the sales, not with the keys. The script opens
-- no key (SALES and INFO are keyless), so it runs on a cluster node too, as
-- every node lists its own sales; STREAM_SUFFIX reads keys it does not
-- declare, so set it outside a cluster only.

local STREAM_SUFFIX = nil
local MAX_PAGES = 100 -- 100,000 sales at the most

local call, gmatch = redis.call, string.gmatch

-- The reply, filled in place: (name, value) pairs, both strings (redis_exporter
-- 1.45 reads the reply as strings: an integer in it fails the whole scrape).
local out, n = {}, 0

-- INFO seckill: "seckill_name:value" lines.
for name, value in gmatch(call('INFO', 'seckill'), 'seckill_([%w_]+):(%-?%d+)') do
  out[n + 1], out[n + 2], n = 'seckill_' .. name, value, n + 2
end

local function stream_metrics(label, stream)
  local groups = redis.pcall('XINFO', 'GROUPS', stream)
  if type(groups) ~= 'table' or groups.err then
    return
  end
  for _, g in ipairs(groups) do
    local info = {}
    for i = 1, #g - 1, 2 do
      info[g[i]] = g[i + 1]
    end
    local glabel = label .. ';group=' .. tostring(info['name'])
    out[n + 1], out[n + 2], n = 'seckill_stream_pending' .. glabel, tostring(info['pending'] or 0), n + 2
    -- lag (Redis 7.0+) is nil when the server cannot tell (entries deleted).
    if type(info['lag']) == 'number' then
      out[n + 1], out[n + 2], n = 'seckill_stream_lag' .. glabel, tostring(info['lag']), n + 2
    end
  end
end

local cursor, sales, broken, fenced = '0', 0, 0, 0
for _ = 1, MAX_PAGES do
  local page = call('SECKILL.SALES', cursor, 'COUNT', 1000, 'WITHCOUNTS')
  local flat = page[2]
  -- key, remaining, pending, confirmed, expired, invariant (1 ok), fenced (1)
  for i = 1, #flat, 7 do
    local key = flat[i]
    out[n + 1], out[n + 2] = 'seckill_sale_remaining;sale=' .. key, tostring(flat[i + 1])
    out[n + 3], out[n + 4] = 'seckill_sale_pending;sale=' .. key, tostring(flat[i + 2])
    out[n + 5], out[n + 6] = 'seckill_sale_confirmed;sale=' .. key, tostring(flat[i + 3])
    out[n + 7], out[n + 8] = 'seckill_sale_expired;sale=' .. key, tostring(flat[i + 4])
    n = n + 8
    if flat[i + 5] == 0 then
      out[n + 1], out[n + 2], n = 'seckill_sale_invariant_ok;sale=' .. key, '0', n + 2
      broken = broken + 1
    end
    if flat[i + 6] == 1 then
      out[n + 1], out[n + 2], n = 'seckill_sale_fenced;sale=' .. key, '1', n + 2
      fenced = fenced + 1
    end
    if STREAM_SUFFIX then
      stream_metrics(';sale=' .. key, key .. STREAM_SUFFIX)
    end
    sales = sales + 1
  end
  cursor = page[1]
  if cursor == '0' then
    break
  end
end
out[n + 1], out[n + 2] = 'seckill_exporter_sales', tostring(sales)
out[n + 3], out[n + 4] = 'seckill_exporter_invariant_broken', tostring(broken)
out[n + 5], out[n + 6] = 'seckill_exporter_fenced', tostring(fenced)
return out
