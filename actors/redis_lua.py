"""The Lua scripts of the Redis bus (actors/redis_bus.py): the append, the repair and quarantine of foreign
entries, the dead letters, the trim. Each runs atomically in Redis; apart from the bus class so the
scripts, which are most of what there is to check about atomicity, read on their own.
"""

from __future__ import annotations

from .bus import DEAD_LETTERS_MAXLEN, MAX_DEAD_PAYLOAD

# Foreign entries (docs/delivery.md, "Foreign entries"): an entry dralab did not append has an id that
# is not an offset (``N-0`` with N from the run's ``{s}:seq``). ``repair(log, dead, floor, ids, who,
# fixed)`` sets aside, atomically, the entries ``ids`` (foreign ids a reader met below the floor: a
# non-zero sequence part) and every entry above ``floor-0`` (nothing of the run's is: the append
# script INCRs seq before its XADD, and floor is that seq): one dead letter each (offset 0, the raw
# id, the reason, the payload cut to MAX_DEAD_PAYLOAD), XDEL, XACK in every group. Then it puts the
# stream's last id back to ``floor-0`` (XSETID: the next append's XADD of ``floor+1-0`` is accepted
# again) and every group that was delivered past it back to ``floor-0`` (XGROUP SETID: the next
# entry is delivered; everything up to floor had been delivered to such a group, in order). Each set
# aside entry is added to ``fixed`` as {id, reason, size}.
_REPAIR_LUA = """
local function id_parts(sid)
  local a, b = string.match(sid, '^(%d+)%-(%d+)$')
  return tonumber(a) or 0, tonumber(b) or 0
end

local function above(sid, floor)
  local ms, sq = id_parts(sid)
  return ms > floor or (ms == floor and sq > 0)
end

local function render(f)
  if f[1] == 'p' and (#f == 2 or (#f == 4 and f[3] == 'i')) then
    return f[2]
  end
  local parts = {}
  for j = 1, #f, 2 do
    parts[#parts + 1] = tostring(f[j]) .. '=' .. tostring(f[j + 1] or '')
  end
  return '\\193' .. table.concat(parts, '\\n')
end

local function repair(log, dead, floor, ids, who, fixed)
  if redis.call('EXISTS', log) == 0 then
    return
  end
  local groups = {}
  for _, g in ipairs(redis.call('XINFO', 'GROUPS', log)) do
    local name, last
    for j = 1, #g, 2 do
      if g[j] == 'name' then name = g[j + 1] elseif g[j] == 'last-delivered-id' then last = g[j + 1] end
    end
    groups[#groups + 1] = {name, last}
  end
  local function drop(sid, fields, reason)
    local payload = render(fields)
    redis.call('XADD', dead, 'MAXLEN', '~', '@MAXLEN@', '*', 'offset', '0', 'id', sid, 'reason', reason,
               'consumer', who, 'size', #payload, 'payload', string.sub(payload, 1, @MAXPAY@))
    redis.call('XDEL', log, sid)
    for _, g in ipairs(groups) do
      redis.call('XACK', log, g[1], sid)
    end
    fixed[#fixed + 1] = {sid, reason, #payload}
  end
  for _, sid in ipairs(ids) do
    -- only an id with a non-zero sequence part here (those above the floor: the scan below). An N-0 a
    -- reader took for foreign may be the run's by now: the append that met it repaired, then appended N.
    local _, sq = id_parts(sid)
    local found = sq > 0 and redis.call('XRANGE', log, sid, sid) or {}
    if #found == 1 and not above(sid, floor) then
      drop(sid, found[1][2], 'foreign id ' .. sid .. ': not an offset of the run (its sequence part is not 0)')
    end
  end
  local top = string.format('%d', floor) .. '-0'
  while true do
    local found = redis.call('XRANGE', log, '(' .. top, '+', 'COUNT', 100)
    if #found == 0 then
      break
    end
    for _, e in ipairs(found) do
      drop(e[1], e[2], 'foreign id ' .. e[1] .. ': beyond the last offset the run appended ('
           .. string.format('%d', floor) .. ')')
    end
  end
  local info = redis.call('XINFO', 'STREAM', log)
  for j = 1, #info, 2 do
    if info[j] == 'last-generated-id' and above(info[j + 1], floor) then
      redis.call('XSETID', log, top)
    end
  end
  for _, g in ipairs(groups) do
    if above(g[2], floor) then
      redis.call('XGROUP', 'SETID', log, g[1], top)
    end
  end
end
""".replace("@MAXLEN@", str(DEAD_LETTERS_MAXLEN)).replace("@MAXPAY@", str(MAX_DEAD_PAYLOAD))

# KEYS: log, seq, dead.  ARGV: who, foreign id * n (met by a reader below the floor).  The floor is
# the run's seq, read here: GET after the read that met the entries, so >= every offset it read.
# Returns the entries set aside ({id, reason, size} each); none if another reader got there first.
_QUARANTINE_LUA = _REPAIR_LUA + """
local fixed = {}
local ids = {}
for j = 2, #ARGV do
  ids[#ids + 1] = ARGV[j]
end
repair(KEYS[1], KEYS[3], tonumber(redis.call('GET', KEYS[2]) or '0'), ids, ARGV[1], fixed)
return fixed
"""

# A stranger's entry at the run's next offset without the payload field (the foreign-writer fault's
# `no-payload` form, the reproduction). KEYS: log, seq.  ARGV: junk.  Returns the offset, or 0
# when the stream's top refused the id (a foreign entry above the run's offsets, not repaired yet):
# then seq is left alone, so the run never has an offset without an entry.
_FOREIGN_NO_PAYLOAD_LUA = """
local o = string.format('%d', tonumber(redis.call('GET', KEYS[2]) or '0') + 1)
local added = redis.pcall('XADD', KEYS[1], o .. '-0', 'x', ARGV[1])
if type(added) == 'table' and added.err then
  return 0
end
redis.call('INCR', KEYS[2])
return tonumber(o)
"""

# KEYS: log, seq, ver, ids, dead.  ARGV, repeated per item:
#   payload, id, n_expect, (key, version) * n_expect, n_writes, key * n_writes
# Returns {replies, set_aside}: one reply per item: {1, orig} duplicate, {0, offset} appended; on a
# conflict the last reply is {2, key, expected, actual} and the remaining items are not looked at.
# ``set_aside`` lists the foreign entries the repair took out of the way ({id, reason, size} each).
_APPEND_LUA = _REPAIR_LUA + """
local log, seq, ver, ids, dead = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local out = {}
local fixed = {}
local i = 1
while i <= #ARGV do
  local payload, id = ARGV[i], ARGV[i + 1]
  local ne = tonumber(ARGV[i + 2])
  local w = i + 3 + 2 * ne
  local nw = tonumber(ARGV[w])
  local orig = redis.call('HGET', ids, id)
  if orig then
    out[#out + 1] = {1, tonumber(orig)}
  else
    for e = 0, ne - 1 do
      local key, want = ARGV[i + 3 + 2 * e], ARGV[i + 4 + 2 * e]
      local have = redis.call('HGET', ver, key) or '0'
      if have ~= want then
        out[#out + 1] = {2, key, want, have}
        return {out, fixed}
      end
    end
    local off = string.format('%d', redis.call('INCR', seq))
    local added = redis.pcall('XADD', log, off .. '-0', 'p', payload, 'i', id)
    if type(added) == 'table' and added.err then
      -- a foreign entry sits above the run's offsets (an auto id, say): set it aside, repair, append
      repair(log, dead, tonumber(off) - 1, {}, 'append', fixed)
      redis.call('XADD', log, off .. '-0', 'p', payload, 'i', id)
    end
    for k = w + 1, w + nw do
      redis.call('HSET', ver, ARGV[k], off)
    end
    redis.call('HSET', ids, id, off)
    out[#out + 1] = {0, tonumber(off)}
  end
  i = w + 1 + nw
end
return {out, fixed}
"""


# KEYS: dead stream, dead index.  ARGV: offset, reason, consumer, payload, size, maxlen.
# Returns 1 if stored, 0 if that offset had been set aside already.
_DEAD_LETTER_LUA = """
if redis.call('HSETNX', KEYS[2], ARGV[1], '1') == 0 then
  return 0
end
redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[6], '*', 'offset', ARGV[1], 'reason', ARGV[2],
           'consumer', ARGV[3], 'size', ARGV[5], 'payload', ARGV[4])
return 1
"""

# KEYS: log.  ARGV: keep_from (0: none).  Returns {removed, floor} (floor 0: no group, nothing
# removed). The floor is the smallest, over all groups, of the oldest pending entry, else the last
# delivered offset + 1, and of keep_from.
_TRIM_LUA = """
local log = KEYS[1]
local keep = tonumber(ARGV[1])
if redis.call('EXISTS', log) == 0 then
  return {0, 0}
end
local floor = nil
for _, g in ipairs(redis.call('XINFO', 'GROUPS', log)) do
  local name, last
  for j = 1, #g, 2 do
    if g[j] == 'name' then name = g[j + 1] elseif g[j] == 'last-delivered-id' then last = g[j + 1] end
  end
  local need
  local p = redis.call('XPENDING', log, name)
  if tonumber(p[1]) > 0 then
    need = tonumber(string.match(p[2], '^(%d+)'))
  else
    need = tonumber(string.match(last, '^(%d+)')) + 1
  end
  if floor == nil or need < floor then
    floor = need
  end
end
if floor == nil then
  return {0, 0}
end
if keep > 0 and keep < floor then
  floor = keep
end
local removed = redis.call('XTRIM', log, 'MINID', string.format('%d', floor) .. '-0')
return {removed, floor}
"""
