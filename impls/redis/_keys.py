"""Where the Redis store keeps things: every key of one namespace, and nothing else knows them.

All keys share the prefix ``rt:{<namespace>}:``; the braces are a cluster hash tag, so a whole
namespace lives in one slot and every script may touch all of its keys. Identifiers in key names
are contract-valid ids (``[A-Za-z0-9._-]``, a client message id may add ``:``), so ``:`` between
tenant and conversation is unambiguous, and ``\\x00`` joins the parts of a commit key so that
byte order of the joined member equals the order of the (tenant, sender, cmid) tuple.

=================================  =======  ==============================================
key                                type     holds
=================================  =======  ==============================================
``rt:{ns}:c:<t>\\0<s>\\0<cmid>``     hash     one commit (``_codec``: in-flight or compact)
``rt:{ns}:ms:<t>``                 string   tenant message-number counter
``rt:{ns}:cs:<t>:<conv>``          string   conversation sequence counter
``rt:{ns}:rec``                    zset     recovery candidates: score accepted_at_ms,
                                            member ``<t>\\0<s>\\0<cmid>``
``rt:{ns}:hi:<t>:<conv>``          zset     history index: score = member = conv seq
``rt:{ns}:hd:<t>:<conv>``          hash     history data: ``m<seq>`` meta, ``b<seq>`` body,
                                            ``x<seq>`` expiry (ms), registered at commit
``rt:{ns}:ob``                     stream   the outbox stream
``rt:{ns}:obd``                    hash     outbox dedupe: member -> stream entry id
=================================  =======  ==============================================
"""

from __future__ import annotations

import functools

from impls.redis._codec import text
from model.commit import (
    CommitKey,
    ConversationId,
    TenantId,
    is_valid_client_message_id,
    is_valid_id,
)

MEMBER_SEPARATOR = b"\x00"


def valid_namespace(namespace: str) -> bool:
    """A namespace may not break the hash tag or the prefix."""
    return bool(namespace) and not any(ch in namespace for ch in "{}\x00") and namespace.isprintable()


@functools.lru_cache(maxsize=1024)
def addressable(key: CommitKey) -> bool:
    """Whether ``key`` could ever have been reserved; other keys are absent by construction.

    Asked before every transition of a commit, so the answer is kept per key."""
    return (
        is_valid_id(key.tenant)
        and is_valid_id(key.sender)
        and is_valid_client_message_id(key.client_message_id)
    )


@functools.lru_cache(maxsize=1024)
def member(key: CommitKey) -> bytes:
    """Asked for several times per commit (key name, recovery member, outbox dedupe), built once."""
    return MEMBER_SEPARATOR.join(text(part) for part in key.sort_key())


def key_of_member(raw: bytes) -> CommitKey:
    tenant, sender, cmid = raw.decode().split("\x00")
    return CommitKey(tenant, sender, cmid)


#: Matches every key of every namespace (``conformance clean`` lists them with it).
ALL_NAMESPACES = b"rt:{*}:*"


def namespace_of(key: bytes) -> str | None:
    """The namespace a key belongs to, or None for a key that is not ours."""
    if not key.startswith(b"rt:{"):
        return None
    end = key.find(b"}:", 4)
    return key[4:end].decode("utf-8", "replace") if end > 4 else None


class Keys:
    """The key names of one namespace."""

    def __init__(self, namespace: str) -> None:
        self.prefix = text(f"rt:{{{namespace}}}:")
        self.commit_prefix = self.prefix + b"c:"
        self.recovery = self.prefix + b"rec"
        self.outbox_stream = self.prefix + b"ob"
        self.outbox_dedupe = self.prefix + b"obd"

    def commit(self, key: CommitKey) -> bytes:
        return self.commit_prefix + member(key)

    def message_seq(self, tenant: TenantId) -> bytes:
        return self.prefix + b"ms:" + text(tenant)

    def conversation_seq(self, tenant: TenantId, conversation: ConversationId) -> bytes:
        return self.prefix + b"cs:" + self._conversation(tenant, conversation)

    def history_index(self, tenant: TenantId, conversation: ConversationId) -> bytes:
        return self.prefix + b"hi:" + self._conversation(tenant, conversation)

    def history_data(self, tenant: TenantId, conversation: ConversationId) -> bytes:
        return self.prefix + b"hd:" + self._conversation(tenant, conversation)

    @staticmethod
    def _conversation(tenant: TenantId, conversation: ConversationId) -> bytes:
        return text(f"{tenant}:{conversation}")


#: C-ERR-01: what this store's keys and scripts look like; no error detail may carry any of it.
INTERNAL_TEXT = frozenset(
    {
        "rt:{",
        "redis.call",
        "KEYS[",
        "ARGV[",
        *(f"{command} " for command in ("HGET", "HGETALL", "HMGET", "HSET", "ZADD", "ZREM", "XADD", "INCR")),
        "ZRANGEBYSCORE",
        "ZREVRANGEBYSCORE",
        "EVALSHA",
        "NOSCRIPT",
        "WRONGTYPE",
        "ResponseError",
        "user_script",
    }
)
