"""The demo conversation: several weeks of one user's chats with an assistant, with tool calls.

Written for the project, deterministic. Each session is a day; facts the user
mentions early (names, dates, numbers, preferences) are asked about at the end,
long after they left the window, so the demo can show recall at work.
"""

from __future__ import annotations

import datetime as dt
import json
import random
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

START = dt.datetime(2026, 3, 2, 9, 0, tzinfo=dt.timezone.utc)

# (user says, assistant answers): the facts a later question relies on.
FACTS = [
    ("My sister Lena is getting married in Porto on the 14th of June, and I'm giving a speech.",
     "Congratulations to Lena! A wedding speech in Porto on 14 June - let's plan it early."),
    ("I'm allergic to peanuts, so please never suggest recipes with them.",
     "Understood: no peanuts in anything I suggest."),
    ("Our team switched the billing service from Flask to FastAPI last sprint; the migration ticket is BILL-482.",
     "Got it: BILL-482, billing service moved from Flask to FastAPI."),
    ("My running goal this year is a half marathon under 1 hour 55 minutes.",
     "A sub-1:55 half marathon is a solid goal; we can build a plan around it."),
    ("The Wi-Fi password at the cabin is on a sticky note: lake-house-2291.",
     "Noted the cabin Wi-Fi password, lake-house-2291."),
    ("My daughter Mia starts piano lessons with Mr. Okafor on Thursdays at 4 pm.",
     "Mia's piano lessons: Thursdays at 4 pm with Mr. Okafor."),
    ("I booked the Lisbon flight TP 1351, departing at 07:40 on June 12th.",
     "Flight TP 1351 to Lisbon, 07:40 on 12 June - I'll remember it."),
    ("We chose the blue Subaru Outback over the Toyota RAV4 because of the boot space.",
     "The blue Subaru Outback it is - the boot space won."),
]

QUESTIONS = [
    ("When and where is Lena's wedding?", 0),
    ("What am I allergic to?", 1),
    ("What was the ticket number for the billing migration?", 2),
    ("What's my half marathon target time?", 3),
    ("What's the Wi-Fi password at the cabin?", 4),
    ("Which car did we pick and why?", 7),
]

SMALL_TALK = [
    ("Can you suggest a quick lunch idea?", "Try a chickpea salad with lemon, cucumber and feta - ten minutes, no cooking."),
    ("How do I keep basil alive on a windowsill?", "Water when the top soil is dry, pinch off flowers, and give it six hours of light."),
    ("What's a good stretch after a long run?", "A standing quad stretch and a hamstring fold, thirty seconds each side."),
    ("Give me a tip for focusing in the afternoon.", "Work in 25-minute blocks with a 5-minute walk between them."),
    ("Any podcast recommendations about history?", "Try 'The Rest Is History' or 'Fall of Civilizations'."),
    ("How long should I boil an egg for a jammy yolk?", "Six and a half minutes, then straight into ice water."),
    ("Summarize the difference between TCP and UDP in one line.", "TCP is reliable and ordered; UDP is fast and fire-and-forget."),
    ("What's a polite way to decline a meeting?", "Thank them, say you can't make it, and offer an async update instead."),
    ("Remind me how to undo the last git commit but keep the changes.", "Run `git reset --soft HEAD~1`; your changes stay staged."),
    ("What should I pack for a weekend hike?", "Water, layers, a rain shell, snacks, a map, a headlamp and a small first-aid kit."),
    ("Write a haiku about Monday mornings.", "Coffee steam rising / inbox glowing in the dark / the week clears its throat"),
    ("How do I convert Celsius to Fahrenheit?", "Multiply by 9/5 and add 32: 20 °C is 68 °F."),
    ("Explain what a Python generator is, briefly.", "A function that yields values lazily, pausing between them instead of returning once."),
    ("Ideas for a rainy Sunday with kids?", "Build a blanket fort, bake cookies, or run an indoor treasure hunt."),
    ("How many minutes of sleep is a full cycle?", "About 90 minutes; waking between cycles feels easier."),
    ("What's a simple way to start journaling?", "Write three lines each night: what happened, what you felt, what you'll try tomorrow."),
]

TOOLS = [
    ("What's the weather in Porto this weekend?", "get_weather", {"city": "Porto", "days": 2},
     {"city": "Porto", "forecast": ["sunny 24C", "cloudy 21C"]},
     "Porto looks good: sunny and 24 °C on Saturday, cloudy and 21 °C on Sunday."),
    ("Add a reminder to practice the speech on Friday evening.", "create_reminder",
     {"title": "Practice wedding speech", "when": "Friday 19:00"}, {"status": "created", "id": "rem-77"},
     "Done - reminder rem-77 set for Friday at 19:00."),
    ("How far is a half marathon in miles?", "calculator", {"expression": "21.0975 / 1.609344"},
     {"result": 13.109}, "A half marathon is about 13.1 miles."),
    ("Look up flights from Lisbon to Porto on June 13th.", "search_flights",
     {"from": "LIS", "to": "OPO", "date": "2026-06-13"},
     {"flights": [{"number": "TP 1940", "dep": "09:05"}, {"number": "TP 1946", "dep": "17:30"}]},
     "Two options: TP 1940 at 09:05 or TP 1946 at 17:30."),
]


@dataclass(frozen=True)
class Turn:
    """One user turn and what follows it, as message dicts with timestamps."""

    session: int
    messages: tuple[dict[str, Any], ...]


def demo_turns(sessions: int = 8, turns_per_session: int = 40, seed: int = 7) -> Iterator[Turn]:
    """The scripted conversation, turn by turn (about ``sessions * turns_per_session`` turns)."""
    rng = random.Random(seed)
    fact_at = {(i % sessions, 3 + (i * 7) % 10): i for i in range(len(FACTS))}
    call = 0
    for s in range(sessions):
        clock = START + dt.timedelta(days=4 * s)
        for t in range(turns_per_session):
            clock += dt.timedelta(minutes=rng.randint(1, 9))
            ts = clock.timestamp()
            if (s, t) in fact_at:
                user, answer = FACTS[fact_at[(s, t)]]
                yield Turn(s, _pair(user, answer, ts))
            elif t % 9 == 5:
                ask, tool, args, result, answer = TOOLS[(s + t) % len(TOOLS)]
                call += 1
                cid = f"call_{call:04d}"
                yield Turn(s, (
                    {"role": "user", "content": ask, "created_at": ts},
                    {"role": "assistant", "content": None, "created_at": ts + 1,
                     "tool_calls": [{"id": cid, "name": tool, "arguments": json.dumps(args)}]},
                    {"role": "tool", "content": json.dumps(result), "tool_call_id": cid, "name": tool,
                     "created_at": ts + 2},
                    {"role": "assistant", "content": answer, "created_at": ts + 3},
                ))
            else:
                user, answer = SMALL_TALK[rng.randrange(len(SMALL_TALK))]
                yield Turn(s, _pair(user, answer, ts))


def _pair(user: str, answer: str, ts: float) -> tuple[dict[str, Any], ...]:
    return ({"role": "user", "content": user, "created_at": ts},
            {"role": "assistant", "content": answer, "created_at": ts + 2})
