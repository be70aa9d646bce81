"""Entitlement verification (spec section 4.8): may this update be written?

A policy is one function of the key's current stored item and the proposed update. Every node
asks its policy when it initiates an update and when it votes, so a node that refuses
votes "no" and the update cannot commit anywhere; and again on each commit and sync item it
takes (a yes given while syncing checked nothing; a commit may name another key than its vote). ``none`` allows everything (the default);
``ownership`` is the example policy: the first writer of a key owns it (the update's
``owner``, or its initiating node when the update names none) and only that owner may change it.
"""

from __future__ import annotations

from collections.abc import Callable

from nodes.drip.codec import Item, Update

#: (current item or None, proposed update, initiating node) -> refusal reason, or None to allow
Policy = Callable[[Item | None, Update, str], str | None]


def allow_all(_current: Item | None, _up: Update, _initiator: str) -> str | None:
    return None


def key_ownership(current: Item | None, up: Update, initiator: str) -> str | None:
    owner = up.owner or initiator
    if current is None or current.owner is None or current.owner == owner:
        return None
    return f"key {up.key!r} is owned by {current.owner!r}, not {owner!r}"


POLICIES: dict[str, Policy] = {"none": allow_all, "ownership": key_ownership}


def get_policy(name: str) -> Policy:
    try:
        return POLICIES[name]
    except KeyError:
        raise ValueError(f"unknown entitlement policy {name!r}; choose one of {sorted(POLICIES)}") from None
