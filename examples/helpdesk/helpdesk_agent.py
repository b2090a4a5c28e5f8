"""A customer-support reply agent: a ticket in, the reply to send out.

It stands in for a model-backed agent with canned replies chosen by what the
ticket is about, the order number filled in. Most replies are what a good
support desk writes; three are the habits the judged suite is there to catch:

- when tracking says a parcel was delivered, ``reply`` blames the customer;
- for a double charge it promises a voucher, which the shop's policy forbids
  (compensation is decided by billing, never promised in a reply);
- every third time it answers the same ticket in a process it is curt: the
  remedy without a word of apology, as a model sometimes is. Three trials of
  a case see it once, so that case's judge passes two trials of three.

``reply_v2`` is the next version: the same desk with those habits fixed.
"""

from __future__ import annotations

import re
import threading
from collections import Counter
from typing import Any

_ORDER = re.compile(r"\bA-\d+\b")
_seen: Counter[str] = Counter()
_lock = threading.Lock()


def _order(ticket: str) -> str:
    found = _ORDER.search(ticket)
    return f"order {found[0]}" if found else "your order"


def _topic(ticket: str) -> str:
    text = ticket.lower()
    if "charged twice" in text or "double charge" in text:
        return "double-charge"
    if "delivered" in text and ("nothing" in text or "not there" in text):
        return "delivered-missing"
    if any(word in text for word in ("broken", "cracked", "smashed")):
        return "broken"
    if "size" in text or "swap" in text:
        return "exchange"
    if "cancel" in text:
        return "cancel"
    if "address" in text or "moved" in text:
        return "address"
    if "late" in text or "hasn't arrived" in text or "still not" in text:
        return "late"
    return "other"


def _good(topic: str, order: str) -> str:
    return {
        "late": f"I'm sorry {order} is late. It is with the courier and due on Thursday; "
                "if it has not reached you by Friday, I will resend it at no cost or refund "
                "it, whichever you prefer.",
        "exchange": f"Sorry the size isn't right! I have emailed you a free return label for "
                    f"{order}; as soon as the courier scans it we will send the exchange "
                    "in the size you choose.",
        "broken": f"I'm so sorry {order} arrived broken. I have sent a replacement today by "
                  "tracked delivery, and there is no need to return the broken one.",
        "cancel": f"Of course, and sorry for the hassle. I have cancelled {order} before it "
                  "shipped; you will get a confirmation email within the hour and the "
                  "payment will not be taken.",
        "address": f"Sorry for the trouble with the move. I have updated the delivery "
                   f"address on {order}; the courier will use it and you will get a new "
                   "tracking email.",
        "delivered-missing": f"I'm sorry {order} did not reach you. I have opened a claim "
                             "with the courier and sent a replacement today; if the first "
                             "parcel turns up, just keep it.",
        "double-charge": f"Sorry about the double charge on {order}. I have refunded the "
                         "duplicate payment; it will be back on your card within 5 working "
                         "days.",
        "other": "Thanks for getting in touch. Could you tell me your order number, so I "
                 "can look into it?",
    }[topic]


def _answer(ticket: str, tools: Any, reply: str) -> str:
    # What a model would have used: the ticket plus a 200-token system prompt, the reply.
    tools.usage(input_tokens=200 + len(ticket) // 4, output_tokens=len(reply) // 4,
                cost_usd=0.00004)
    return reply


def reply(ticket: str, tools: Any) -> str:
    """The reply to one ticket, habits included."""
    topic, order = _topic(ticket), _order(ticket)
    with _lock:
        _seen[ticket] += 1
        curt = _seen[ticket] % 3 == 0
    if topic == "delivered-missing":
        return _answer(ticket, tools, "Tracking says it was delivered, so it was delivered. "
                                      "Check with your neighbours next time; parcels left "
                                      "outside are not our responsibility.")
    if topic == "double-charge":
        return _answer(ticket, tools, f"So sorry about the double charge on {order}! I have "
                                      "refunded the duplicate payment, and I have added a "
                                      "£20 voucher to your account for the trouble.")
    if topic == "broken" and curt:
        return _answer(ticket, tools, f"Replacement for {order} sent today by tracked "
                                      "delivery. No need to return the broken one.")
    return _answer(ticket, tools, _good(topic, order))


def reply_v2(ticket: str, tools: Any) -> str:
    """The next version: every ticket gets the good reply."""
    return _answer(ticket, tools, _good(_topic(ticket), _order(ticket)))
