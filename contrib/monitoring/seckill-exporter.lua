-- The seckill metrics for redis_exporter's -script option (tested with
-- Debian 12's prometheus-redis-exporter 1.45). The exporter runs this with
-- EVAL on every scrape and turns each (name, value) pair of the reply into
-- redis_script_values{key="name"}; prometheus.yml's metric_relabel_configs
-- (in this folder) turn them into seckill_* series:
--
--   seckill_<counter>                       INFO seckill's counters (reserve_reserved, ...)
--   seckill_sale_<field>;sale=<key>         each sale's report: total, remaining, pending,
--                                           confirmed, released, expired, buyers, reservations,
--                                           invariant_ok (1/0), fenced (FENCE sales: 1/0)
--   seckill_stream_<lag|pending|consumers>;sale=<key>;group=<group>
--                                           the backlog of each consumer group of the sale's
--                                           stream, named <key>:events (the pipeline's name)
--
-- The sales come from SECKILL.SALES (the module's own list), never from a
-- SCAN: the cost grows with the sales, not with the keys. Outside a cluster
-- only: EVAL declares no keys, so on a cluster node the sales' keys would be
-- undeclared keys of other slots (run one exporter per node with the
-- module's own commands instead).

local STREAM_SUFFIX = ':events'
local MAX_PAGES = 100 -- 100,000 sales at the most

-- The reply, filled in place: (name, value) pairs, both strings (redis_exporter
-- 1.45 reads the reply as strings: an integer in it fails the whole scrape).
local out, n = {}, 0
local function put(name, value)
  out[n + 1] = name
  out[n + 2] = tostring(value)
  n = n + 2
end

-- INFO seckill: "seckill_name:value" lines.
for name, value in string.gmatch(redis.call('INFO', 'seckill'), 'seckill_([%w_]+):(%-?%d+)') do
  put('seckill_' .. name, value)
end

-- Metric names by report field, made once per scrape, not once per sale.
local sale_names = setmetatable({}, {
  __index = function(t, field)
    local name = 'seckill_sale_' .. field .. ';sale='
    t[field] = name
    return name
  end,
})

local function sale_metrics(key)
  local report = redis.call('SECKILL.INFO', key)
  if type(report) ~= 'table' then
    return
  end
  for i = 1, #report - 1, 2 do
    local field, value = report[i], report[i + 1]
    if type(value) == 'number' then
      put(sale_names[field] .. key, value)
    elseif type(value) == 'table' and value.ok then
      -- status replies: invariant's ok, fence's clear or fenced
      if field == 'invariant' then
        put('seckill_sale_invariant_ok;sale=' .. key, value.ok == 'ok' and 1 or 0)
      elseif field == 'fence' then
        put('seckill_sale_fenced;sale=' .. key, value.ok == 'fenced' and 1 or 0)
      end
    end
  end
  local label = ';sale=' .. key
  local groups = redis.pcall('XINFO', 'GROUPS', key .. STREAM_SUFFIX)
  if type(groups) ~= 'table' or groups.err then
    return
  end
  for _, g in ipairs(groups) do
    local info = {}
    for i = 1, #g - 1, 2 do
      info[g[i]] = g[i + 1]
    end
    local glabel = label .. ';group=' .. tostring(info['name'])
    put('seckill_stream_pending' .. glabel, info['pending'] or 0)
    put('seckill_stream_consumers' .. glabel, info['consumers'] or 0)
    -- lag (Redis 7.0+) is nil when the server cannot tell (entries deleted).
    if type(info['lag']) == 'number' then
      put('seckill_stream_lag' .. glabel, info['lag'])
    end
  end
end

local cursor, sales = '0', 0
for _ = 1, MAX_PAGES do
  local page = redis.call('SECKILL.SALES', cursor, 'COUNT', 1000)
  for _, key in ipairs(page[2]) do
    sale_metrics(key)
    sales = sales + 1
  end
  cursor = page[1]
  if cursor == '0' then
    break
  end
end
put('seckill_exporter_sales', sales)
return out
