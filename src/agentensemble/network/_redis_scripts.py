"""The Lua scripts of the Redis queue: each step that must not be split runs as one script."""

from __future__ import annotations

from agentensemble.network._redis_keys import STORE_RESULT_LUA

__all__ = ["ANSWER", "ENQUEUE", "READ_NEXT", "RECLAIM", "RELEASE", "TOUCH"]

ENQUEUE = """
-- KEYS: request key, stream, entries hash. ARGV: payload, request id, dedupe ttl (s).
if not redis.call('SET', KEYS[1], 'accepting', 'NX', 'EX', ARGV[3]) then
  return false
end
local entry = redis.call('XADD', KEYS[2], '*', 'payload', ARGV[1], 'id', ARGV[2])
redis.call('SET', KEYS[1], KEYS[2] .. ' ' .. entry, 'XX', 'KEEPTTL')
redis.call('HSET', KEYS[3], entry, ARGV[2])
return entry
"""

READ_NEXT = """
-- KEYS: the streams, highest priority first. ARGV: group, consumer, most entries to take.
-- Returns {stream index, entry id, fields, ...}: the oldest new entries, highest priority
-- first, never more than asked for.
local wanted = tonumber(ARGV[3])
local taken = {}
for i = 1, #KEYS do
  if wanted <= 0 then
    break
  end
  local got = redis.call('XREADGROUP', 'GROUP', ARGV[1], ARGV[2], 'COUNT', wanted,
    'STREAMS', KEYS[i], '>')
  if got then
    for _, entry in ipairs(got[1][2]) do
      table.insert(taken, i)
      table.insert(taken, entry[1])
      table.insert(taken, entry[2])
      wanted = wanted - 1
    end
  end
end
return taken
"""

ANSWER = (
    STORE_RESULT_LUA
    + """
-- KEYS: result key, stream, entries hash, request (dedupe) key. ARGV: response, ttl (ms),
-- channel, group, entry id ('' when this worker holds no entry for the request).
local won = store_result(KEYS[1], ARGV[3], ARGV[1], ARGV[2])
redis.call('PEXPIRE', KEYS[4], ARGV[2])
if ARGV[5] ~= '' then
  redis.pcall('XACK', KEYS[2], ARGV[4], ARGV[5])
  redis.call('XDEL', KEYS[2], ARGV[5])
  redis.call('HDEL', KEYS[3], ARGV[5])
end
return won
"""
)
"""Answer a request in one step: write its result once (announced only by the write that
won), then acknowledge and delete its entry. A crash can no longer fall between the two.
The id's dedupe record then lives as long as the result: a later submission of the id gets
the result while it is kept, and runs again after."""

RELEASE = """
-- KEYS: stream. ARGV: group, consumer, the consumer to hand it to, entry id.
local pending = redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[4], ARGV[4], 1, ARGV[2])
if #pending == 0 then
  return 0
end
local retries = math.max(tonumber(pending[1][4]) - 1, 0)
redis.call('XCLAIM', KEYS[1], ARGV[1], ARGV[3], 0, ARGV[4], 'RETRYCOUNT', retries, 'JUSTID')
return 1
"""
"""Hand an entry to a consumer that has no heartbeat (peers claim it at their next pass),
taking back the delivery it counted: a released request was not a failed delivery."""

TOUCH = """
-- KEYS: the stream of each entry. ARGV: group, consumer, then the entry ids.
local touched = 0
for n = 1, #KEYS do
  local id = ARGV[n + 2]
  if #redis.call('XPENDING', KEYS[n], ARGV[1], id, id, 1, ARGV[2]) > 0 then
    redis.call('XCLAIM', KEYS[n], ARGV[1], ARGV[2], 0, id, 'JUSTID')
    touched = touched + 1
  end
end
return touched
"""
"""Reset the idle time of entries this worker is running (the delivery count is kept), so
that the visibility timeout never takes work from a live worker."""

RECLAIM = (
    STORE_RESULT_LUA
    + """
-- KEYS: the streams (highest priority first), their entries hashes, the dead-letter stream.
-- ARGV: group, consumer, visibility ms, orphan ms, max deliveries, scan count, result ttl ms,
--   heartbeat prefix, result prefix, notify prefix, grace s, request (dedupe) key prefix,
--   then one cursor per stream, then "index:entry" of each entry this consumer is running.
local group, me = ARGV[1], ARGV[2]
local visibility, orphan = tonumber(ARGV[3]), tonumber(ARGV[4])
local max_deliveries, count, ttl = tonumber(ARGV[5]), tonumber(ARGV[6]), ARGV[7]
local heartbeat, result, notify = ARGV[8], ARGV[9], ARGV[10]
local streams = (#KEYS - 1) / 2
local dead = KEYS[#KEYS]
local mine = {}
local request_key = ARGV[12]
for n = 13 + streams, #ARGV do
  mine[ARGV[n]] = true
end
local uptime = tonumber(string.match(redis.call('INFO', 'server'), 'uptime_in_seconds:(%d+)'))
local trust_heartbeats = uptime >= tonumber(ARGV[11])

local function field(fields, name)
  for n = 1, #fields, 2 do
    if fields[n] == name then
      return fields[n + 1]
    end
  end
  return nil
end

local function fail(request_id, error)
  if request_id then
    local value = cjson.encode({requestId = request_id, status = 'FAILED', error = error})
    store_result(result .. request_id, notify .. request_id, value, ttl)
    redis.call('PEXPIRE', request_key .. request_id, ttl)
  end
end

local function why_claimable(i, id, owner, idle)
  if owner == me then
    if not mine[i .. ':' .. id] and idle >= orphan then
      return 'the reply delivering it to worker ' .. owner .. ' was lost'
    end
  elseif trust_heartbeats and redis.call('EXISTS', heartbeat .. owner) == 0 then
    return 'worker ' .. owner .. ' stopped heartbeating while running it'
  elseif idle >= visibility then
    return 'worker ' .. owner .. ' held it for ' .. idle .. ' ms, past the visibility timeout'
  end
  return nil
end

local function forget(i, id)
  redis.call('XACK', KEYS[i], group, id)
  redis.call('XDEL', KEYS[i], id)
  redis.call('HDEL', KEYS[streams + i], id)
end

-- Answer an entry that must not run again; true when it may be claimed instead.
local function settle(i, id, deliveries, why)
  local request_id = redis.call('HGET', KEYS[streams + i], id)
  local found = redis.call('XRANGE', KEYS[i], id, id)
  if #found == 0 then
    forget(i, id)
    fail(request_id, 'request deleted from the queue while pending')
    return false
  end
  if deliveries < max_deliveries then
    return true
  end
  local fields = found[1][2]
  request_id = request_id or field(fields, 'id')
  local error = why .. ', delivery ' .. deliveries .. ' of ' .. max_deliveries
  local letter = redis.call('XADD', dead, '*', 'payload', field(fields, 'payload') or '',
    'id', request_id or '', 'error', error, 'stream', KEYS[i], 'entry', id)
  forget(i, id)
  fail(request_id, 'dead-lettered to ' .. dead .. ' (entry ' .. letter .. '): ' .. error)
  return false
end

local cursors, answered = {}, 0
for i = 1, streams do
  cursors[i] = ARGV[12 + i]
end
for i = 1, streams do
  local pending = redis.pcall('XPENDING', KEYS[i], group, cursors[i], '+', count)
  if pending.err then
    pending = {}
  end
  local cursor = '-'
  for _, entry in ipairs(pending) do
    local id, owner = entry[1], entry[2]
    local idle, deliveries = tonumber(entry[3]), tonumber(entry[4])
    local why = why_claimable(i, id, owner, idle)
    if why then
      if settle(i, id, deliveries, why) then
        local got = redis.call('XCLAIM', KEYS[i], group, me, 0, id)
        cursors[i] = '(' .. id
        return {{i, got[1][1], got[1][2], deliveries + 1, why}, cursors, 1, answered}
      end
      answered = answered + 1
    end
    cursor = '(' .. id
  end
  if #pending < count then
    cursor = '-'
  end
  cursors[i] = cursor
end
return {{}, cursors, 0, answered}
"""
)
"""Walk (a bounded part of) the pending entries of a queue's streams: answer those that
must not run again (deleted, or delivered `max_deliveries` times: dead-lettered) and claim
for this consumer the first one whose owner is gone (no heartbeat), held it past the
visibility timeout, or is this consumer that never received it. Heartbeats are not trusted
right after Redis started (the keys of live workers may have expired while it was down)."""
