"""The Redis store's server-side scripts: one script per store call.

Rules every write script follows (Redis runs a script atomically but does not roll one back):

* every check comes before the first write, including the shape (TYPE) of each key written, so a
  script either changes nothing or does its whole transition;
* the hot path answers with one bulk string (new coordinates, the stage reached, an entry id),
  since every array element costs the client a parse; other contract outcomes come back as a
  status array (``{'not-found'}``, ``{'exists', ...}``, ...), which the adapter maps to values and
  ``MessageStoreError`` kinds; error replies mean server trouble (WRONGTYPE: stored data of
  another shape);
* running a script again after it applied converges to the same result: redis-py re-sends a
  command after a connection error, so a lost reply can run a script twice. ``reserve`` finds its
  own reserve token, the transitions find the stage already reached, ``publish`` its entry id.

Field names (and the default stream name) are written ``F.<name>`` in the Lua text and spliced in
from ``_codec`` as literals; key names arrive as KEYS.
"""

from __future__ import annotations

import hashlib
import re

import attrs

from impls.redis import _codec


@attrs.frozen
class Script:
    name: str
    source: bytes
    sha: str = attrs.field(init=False)

    @sha.default
    def _sha(self) -> str:
        return hashlib.sha1(self.source).hexdigest()


_FIELDS = {
    "stage": _codec.STAGE,
    "identity": _codec.IDENTITY,
    "conversation": _codec.CONVERSATION,
    "coordinates": _codec.COORDINATES,
    "stream": _codec.STREAM,
    "entry": _codec.ENTRY_ID,
    "record": _codec.RECORD,
    "body": _codec.BODY,
    "delivery": _codec.DELIVERY,
    "token": _codec.TOKEN,
    "fingerprint": _codec.FINGERPRINT,
    "default_stream": _codec.text(_codec.DEFAULT_STREAM),
    "legacy_stage": _codec.LEGACY_STAGE,
    "legacy_committed": _codec.LEGACY_COMMITTED,
    "legacy_identity": _codec.LEGACY_IDENTITY,
    "legacy_conversation": _codec.LEGACY_CONVERSATION,
    "legacy_message_seq": _codec.LEGACY_MESSAGE_SEQ,
    "legacy_conversation_seq": _codec.LEGACY_CONVERSATION_SEQ,
    "legacy_accepted_at": _codec.LEGACY_ACCEPTED_AT,
    "legacy_stream": _codec.LEGACY_STREAM,
    "legacy_entry_id": _codec.LEGACY_ENTRY_ID,
    "history_meta": _codec.HISTORY_META,
    "history_body": _codec.HISTORY_BODY,
    "history_expiry": _codec.HISTORY_EXPIRY,
}

_PRELUDE = """
-- Whether KEY is absent or holds WANT; checked before a write that is not the script's first,
-- so no write can fail half-way (a failing first write or read has changed nothing).
local function shape(key, want)
  local t = redis.call('TYPE', key)['ok']
  return t == 'none' or t == want
end

-- A commit hash in either format, as one table; nil when absent, false when unreadable. A key of
-- another type fails the HGETALL (WRONGTYPE) before the caller writes anything.
local function view(key)
  local flat = redis.call('HGETALL', key)
  if #flat == 0 then return nil end
  local f = {}
  for n = 1, #flat, 2 do f[flat[n]] = flat[n + 1] end
  local v
  if f[F.legacy_stage] then
    if f[F.legacy_stage] ~= F.legacy_committed then return false end
    local m, c, a = f[F.legacy_message_seq], f[F.legacy_conversation_seq], f[F.legacy_accepted_at]
    if not (m and c and a) then return false end
    v = {stage = '4', identity = f[F.legacy_identity], conversation = f[F.legacy_conversation],
         coordinates = m .. ':' .. c .. ':' .. a,
         stream = f[F.legacy_stream], entry = f[F.legacy_entry_id]}
  else
    -- In flight the stage is a field; the compact committed form is the only one without it.
    local stage = f[F.stage]
    local coordinates, stream, entry = f[F.coordinates], f[F.stream], f[F.entry]
    if stage == nil and f[F.record] == nil then
      stage = '4'
      -- Compact: the entry id rides in the coordinates (not in the first release's form), and
      -- the default stream is omitted (see _codec).
      if coordinates then
        local c, e = string.match(coordinates, '^([^:]*:[^:]*:[^:]*):(.*)$')
        if c then
          if entry then return false end
          coordinates, entry = c, e
        end
      end
      if entry and not stream then stream = F.default_stream end
    end
    v = {stage = stage, identity = f[F.identity], conversation = f[F.conversation],
         coordinates = coordinates, stream = stream, entry = entry,
         record = f[F.record], body = f[F.body], delivery = f[F.delivery],
         fingerprint = f[F.fingerprint]}
  end
  local s = v.stage
  if not (s == '1' or s == '2' or s == '3' or s == '4') then return false end
  if f[F.stage] == '4' then return false end
  if not (v.identity and v.conversation and v.coordinates) then return false end
  if s ~= '4' and not (v.record and v.body and v.delivery) then return false end
  if (s == '3' or s == '4') ~= (v.stream ~= nil and v.entry ~= nil) then return false end
  return v
end

-- A publication as the adapter packs it (``_codec.pack_publication``): '<#entry>:<entry><stream>'.
local function unpack_publication(p)
  local colon = string.find(p, ':', 1, true)
  local n = tonumber(string.sub(p, 1, colon - 1))
  return string.sub(p, colon + n + 1), string.sub(p, colon + 1, colon + n)
end

local function pack_publication(stream, entry)
  return #entry .. ':' .. entry .. stream
end
"""

_FIELD_REFERENCE = re.compile(r"\bF\.(\w+)")


def _script(name: str, body: str) -> Script:
    # Field names are spliced in as Lua string literals: no table is built on every call.
    def literal(match: re.Match[str]) -> str:
        return "'" + _FIELDS[match.group(1)].decode() + "'"

    return Script(name, _FIELD_REFERENCE.sub(literal, _PRELUDE + body).encode())


RESERVE = _script(
    "reserve",
    """
-- KEYS: commit, tenant counter, conversation counter, recovery index
-- ARGV: identity, conversation, record, body, delivery, token, accepted_at_ms, member,
--       fingerprint (of record, body and delivery: what the transitions compare)
-- Reply: the new commit's coordinates (a bulk string), or a status array.
local existing = redis.call('HGETALL', KEYS[1])
if #existing > 0 then
  -- The adapter judges identity and stage; a repeat writes nothing (C-POST-01).
  table.insert(existing, 1, 'exists')
  return existing
end
-- GET checks each counter's type too (WRONGTYPE before any write); the recovery index checks
-- its own as the first write, so nothing else can fail after it.
local function counter_ok(key)
  local n = redis.call('GET', key)
  return (not n) or (string.match(n, '^%d+$') ~= nil and #n < 16)
end
if not (counter_ok(KEYS[2]) and counter_ok(KEYS[3])) then return {'corrupt'} end
local score = tonumber(ARGV[7])
if not score or score ~= score or score == math.huge or score == -math.huge then
  return {'bad-timestamp'}
end
redis.call('ZADD', KEYS[4], ARGV[7], ARGV[8])
local ms = redis.call('INCR', KEYS[2])
local cs = redis.call('INCR', KEYS[3])
local coordinates = string.format('%d:%d:', ms, cs) .. ARGV[7]
redis.call('HSET', KEYS[1], F.stage, '1', F.identity, ARGV[1], F.conversation, ARGV[2],
           F.coordinates, coordinates, F.record, ARGV[3], F.body, ARGV[4], F.delivery, ARGV[5],
           F.token, ARGV[6], F.fingerprint, ARGV[9])
return coordinates
""",
)

TRANSITION = _script(
    "transition",
    """
-- KEYS: commit, recovery index, history index, history data
-- ARGV: operation, identity, coordinates, conversation, intent fingerprint,
--       publication ('' = none, else packed), member,
--       history meta (put_record) or history expiry (accepted_at_ms + retention_ms; the commits),
--       and only when asked ('need-intent'): record, body, delivery
-- Reply: the stage reached, followed by the durable publication (packed) when there is one
-- (a bulk string), or a status array.
-- C-POST-03..05: what each operation does from each stage. '=' converges; 'record' and
-- 'publication' name the missing evidence; a digit is the stage to advance to.
local MOVES = {
  put_record = {['1'] = '2', ['2'] = '=', ['3'] = '=', ['4'] = '='},
  mark_outbox_published = {['1'] = 'record', ['2'] = '3', ['3'] = '=', ['4'] = '='},
  mark_published_and_committed = {['1'] = 'record', ['2'] = '4', ['3'] = '4', ['4'] = '='},
  mark_committed = {['1'] = 'record', ['2'] = 'publication', ['3'] = '4', ['4'] = '='},
}
local moves = MOVES[ARGV[1]]
if not moves then return {'bad-operation'} end
local v = view(KEYS[1])
if v == nil then return {'not-found'} end
if v == false then return {'corrupt'} end
if v.identity ~= ARGV[2] or v.coordinates ~= ARGV[3] or v.conversation ~= ARGV[4] then
  return {'intent-mismatch'}
end
-- Before COMMITTED the whole intent must be the reserved one: the fingerprint covers record,
-- body and delivery. A hash reserved before fingerprints existed is compared field by field.
if v.stage ~= '4' then
  if v.fingerprint then
    if v.fingerprint ~= ARGV[5] then return {'intent-mismatch'} end
  elseif #ARGV < 11 then
    return {'need-intent'}
  elseif v.record ~= ARGV[9] or v.body ~= ARGV[10] or v.delivery ~= ARGV[11] then
    return {'intent-mismatch'}
  end
end
local stream, entry
if ARGV[6] ~= '' then
  stream, entry = unpack_publication(ARGV[6])
  if v.stream and (v.stream ~= stream or v.entry ~= entry) then return {'publication-mismatch'} end
end
local move = moves[v.stage]
if move == 'record' or move == 'publication' then return {'missing-evidence', move} end
if move == '=' then
  if v.stream then return v.stage .. pack_publication(v.stream, v.entry) end
  return v.stage
end
local seq = string.match(ARGV[3], '^%d+:(%d+):')
if move == '2' then
  -- The first write checks its own key's type; the history data's is checked before it.
  if not shape(KEYS[4], 'hash') then return {'corrupt'} end
  -- The history entry is the reserved record: its body is copied here, never re-sent.
  redis.call('ZADD', KEYS[3], seq, seq)
  redis.call('HSET', KEYS[4], F.history_meta .. seq, ARGV[8], F.history_body .. seq, v.body)
  redis.call('HSET', KEYS[1], F.stage, '2')
  return '2'
end
if move == '3' then
  redis.call('HSET', KEYS[1], F.stage, '3', F.stream, stream, F.entry, entry)
  return '3' .. ARGV[6]
end
-- COMMITTED: re-create the hash with only the compact fields (HDEL would leave a hashtable);
-- no stage field: the compact form means COMMITTED. ZREM goes first: it checks its own key.
if not shape(KEYS[4], 'hash') then return {'corrupt'} end
stream, entry = v.stream or stream, v.entry or entry
redis.call('ZREM', KEYS[2], ARGV[7])
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], F.identity, v.identity, F.conversation, v.conversation,
           F.coordinates, v.coordinates .. ':' .. entry)
if stream ~= F.default_stream then redis.call('HSET', KEYS[1], F.stream, stream) end
redis.call('HSET', KEYS[4], F.history_expiry .. seq, ARGV[8])
return '4' .. pack_publication(stream, entry)
""",
)

SCAN_RECOVERABLE = _script(
    "scan_recoverable_commits",
    """
-- KEYS: recovery index. ARGV: older_than (exclusive), max_items, commit key prefix.
-- The commit hashes read here are named from the members, not declared in KEYS; they share the
-- namespace's hash tag, so on a cluster they are in the declared key's slot.
-- Equal scores sort by member bytes, and members are tenant\\0sender\\0cmid: the contract's order.
if not shape(KEYS[1], 'zset') then return {'corrupt'} end
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', '(' .. ARGV[1], 'LIMIT', 0, tonumber(ARGV[2]))
local out = {'ok'}
for _, member in ipairs(due) do
  local key = ARGV[3] .. member
  if not shape(key, 'hash') then return {'corrupt'} end
  local flat = redis.call('HGETALL', key)
  out[#out + 1] = member
  out[#out + 1] = #flat
  for _, x in ipairs(flat) do out[#out + 1] = x end
end
return out
""",
)

HISTORY_PAGE = _script(
    "history_page",
    """
-- KEYS: history index, history data, conversation counter
-- ARGV: direction ('before'/'after'), anchor ('' = none), limit, max_bytes, as_of_ms
-- Reply: {'ok', available_through, available_from ('' = none), has_more, meta1, body1, ...}

-- Exact comparison of canonical decimal integers (expiry vs as_of may exceed 2^53).
local function icmp(a, b)
  local na, nb = string.sub(a, 1, 1) == '-', string.sub(b, 1, 1) == '-'
  if na ~= nb then return na and -1 or 1 end
  local r
  if #a ~= #b then r = (#a < #b) and -1 or 1
  elseif a == b then r = 0
  else r = (a < b) and -1 or 1 end
  return na and -r or r
end
if not (shape(KEYS[1], 'zset') and shape(KEYS[2], 'hash') and shape(KEYS[3], 'string')) then
  return {'corrupt'}
end
local as_of = ARGV[5]
local function live(seq)
  local expiry = redis.call('HGET', KEYS[2], F.history_expiry .. seq)
  return (not expiry) or icmp(expiry, as_of) > 0
end
local BATCH = 128
local through = redis.call('GET', KEYS[3]) or '0'

local from = ''
local cursor = '-inf'
while from == '' do
  local batch = redis.call('ZRANGEBYSCORE', KEYS[1], cursor, '+inf', 'LIMIT', 0, BATCH)
  if #batch == 0 then break end
  for _, seq in ipairs(batch) do
    if live(seq) then from = seq break end
  end
  cursor = '(' .. batch[#batch]
end

local before = ARGV[1] == 'before'
local limit, max_bytes = tonumber(ARGV[3]), tonumber(ARGV[4])
local bound
if ARGV[2] == '' then bound = before and '+inf' or '-inf' else bound = '(' .. ARGV[2] end
local out = {'ok', through, from, 0}
local taken, spent = 0, 0
while true do
  local batch
  if before then
    batch = redis.call('ZREVRANGEBYSCORE', KEYS[1], bound, '-inf', 'LIMIT', 0, BATCH)
  else
    batch = redis.call('ZRANGEBYSCORE', KEYS[1], bound, '+inf', 'LIMIT', 0, BATCH)
  end
  if #batch == 0 then break end
  for _, seq in ipairs(batch) do
    if live(seq) then
      if taken == limit then out[4] = 1 break end
      local got = redis.call('HMGET', KEYS[2], F.history_meta .. seq, F.history_body .. seq)
      if not (got[1] and got[2]) then return {'corrupt'} end
      -- The first entry always fits, so paging by anchor always moves on (C-POST-11).
      if taken > 0 and spent + #got[2] > max_bytes then out[4] = 1 break end
      out[#out + 1] = got[1]
      out[#out + 1] = got[2]
      taken = taken + 1
      spent = spent + #got[2]
    end
  end
  if out[4] == 1 then break end
  bound = '(' .. batch[#batch]
end
return out
""",
)

PUBLISH = _script(
    "publish",
    """
-- KEYS: outbox dedupe hash, outbox stream. ARGV: member, then the event's field/value pairs.
-- Reply: the entry id. One entry per commit key: a second publish (a retry, or a resume after
-- M-COMMIT-04) returns the first entry id instead of appending another. A key of the wrong type
-- fails the HGET or the XADD, before anything is written.
local id = redis.call('HGET', KEYS[1], ARGV[1])
if id then return id end
id = redis.call('XADD', KEYS[2], '*', unpack(ARGV, 2))
redis.call('HSET', KEYS[1], ARGV[1], id)
return id
""",
)
