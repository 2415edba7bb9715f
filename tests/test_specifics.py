"""The detector of specific statements: each kind on hand-made sentences, filler scoring low,
templates discounted by repetition, and the compressed core of a sentence."""

from __future__ import annotations

import pytest

from langmem_tiers.specifics import (
    KINDS,
    SPECIFIC_THRESHOLD,
    core_of,
    salience,
    score_sentence,
    sentence_shape,
    specific_statements,
    split_sentences,
    template_variants,
)

# (kind, sentence): every kind the detector names, each found in a sentence written for this test.
KIND_CASES = [
    ("name", "Our parrot is named Kiwi and he talks all day."),
    ("number", "I counted 42 boxes in my garage."),
    ("date", "My exam is on 14 February."),
    ("date", "The dinner is at 7:30pm, I think."),
    ("place", "My cousin studies in Montreal."),
    ("code", "My locker combination is 31-07-19, and the flight is LH2241."),
    ("code", "You can reach me at ana.perez@example.org if needed."),
    ("preference", "I can't stand horror films."),
    ("preference", "My favourite colour is teal."),
    ("possession", "I own a small sailing boat."),
    ("relation", "My brother-in-law works at the harbour."),
    ("plan", "We're planning a road trip along the coast."),
    ("commitment", "I promised the team I'd finish the report."),
    ("identity", "I'm a paediatric nurse."),
    ("identity", "My name is Ruth."),
    ("change", "I no longer drink coffee."),
    ("change", "We relocated to the countryside last year, and my new commute is short."),
]


@pytest.mark.parametrize(("kind", "sentence"), KIND_CASES)
def test_each_kind_is_found_and_specific(kind: str, sentence: str) -> None:
    found = score_sentence(sentence)
    assert kind in found.kinds, (kind, sorted(found.kinds), sentence)
    assert found.specific
    assert found.score >= SPECIFIC_THRESHOLD
    assert all(e.kind in KINDS for e in found.evidence)


def test_every_kind_has_a_case() -> None:
    assert {k for k, _ in KIND_CASES} == set(KINDS)


@pytest.mark.parametrize(
    "sentence",
    [
        "Haha, that sounds fun!",
        "The weather has been lovely lately.",
        "Still waiting on the build.",
        "ok",
        "Did you see the game last night?",
        "Message 41: the train left from platform 12 again.",  # numbers of its own, nobody's fact
        "The bus was late again, about 12 minutes.",
        "x " * 500,
    ],
)
def test_filler_is_not_specific(sentence: str) -> None:
    assert not score_sentence(sentence).specific, score_sentence(sentence)


def test_a_personal_fact_outscores_filler_with_numbers_and_names() -> None:
    fact = score_sentence("By the way, my cat is called Miso.")
    for filler in ("Message 41: the train left from platform 12 again.", "Ticket 3321 got closed by Priya today.",
                   "I love this weather."):
        assert fact.score > score_sentence(filler).score, filler


def test_shapes_mask_digits_and_names() -> None:
    assert sentence_shape("Message 41: the train left from platform 12 again") == sentence_shape(
        "Message 7: the train left from platform 3 again"
    )
    assert sentence_shape("Ticket 3321 got closed by Priya") == sentence_shape("Ticket 88 got closed by Tom")
    assert sentence_shape("My cat is called Miso") != sentence_shape("My dog is called Rex")


def test_template_variants_count_distinct_fillings_not_repeats() -> None:
    sentences = [
        "Message 41: the train left from platform 12 again.",
        "Message 7: the train left from platform 3 again.",
        "Message 98: the train left platform 5.",  # an optional word dropped: still the template
        "My cat is called Miso.",
        "My cat is called Miso.",  # said twice: one variant
    ]
    assert template_variants(sentences) == [3, 3, 3, 1, 1]


def test_repetition_lowers_salience() -> None:
    alone = salience(["Ticket 3321 got closed by Priya today."])[0].score
    repeated = salience([f"Ticket {n} got closed by {who} today." for n, who in
                         [(3321, "Priya"), (17, "Tom"), (904, "Ana"), (55, "Lee")]])
    assert all(r.score < alone for r in repeated)
    fact = salience(["My cat is called Miso.", "Ticket 17 got closed by Tom today."])[0]
    assert fact.score == score_sentence("My cat is called Miso.").score  # a unique sentence keeps its score


def test_specific_statements_pick_facts_out_of_a_conversation() -> None:
    messages = [f"Message {n}: the train left from platform {n % 9 + 1} again." for n in range(20)]
    messages[11] += " Oh, and I moved to Lisbon in May."
    messages.append("Haha, fair enough.")
    found = specific_statements(messages)
    assert [s.text for s in found] == ["Oh, and I moved to Lisbon in May."]
    assert {"change", "place", "date"} <= found[0].kinds


def test_subject_names_what_the_statement_is_about() -> None:
    assert score_sentence("My locker code is 4471.").subject == "locker code"
    assert score_sentence("Our new flat is tiny.").subject == "new flat"
    assert score_sentence("I moved to Lisbon.").subject is None


def test_core_keeps_the_clauses_with_values_and_drops_discourse() -> None:
    assert core_of("Oh, before I forget, my cat is called Miso.") == "my cat is called Miso."
    assert core_of("I promised my sister that I would ring her every Sunday.") == (
        "I promised my sister that I would ring her every Sunday."
    )
    assert core_of("My recital is on June 2, please keep that evening free in my calendar.") == (
        "My recital is on June 2"
    )
    long = "I " + "really " * 40 + "like tea."
    assert core_of(long).endswith("…")
    assert len(core_of(long).split()) == 25  # 24 words and the ellipsis


def test_split_sentences_and_determinism() -> None:
    assert split_sentences("Hi there. I moved to Lisbon!\nNew line here") == [
        "Hi there.", "I moved to Lisbon!", "New line here"
    ]
    assert score_sentence("My sister Anna lives in Ghent.") == score_sentence("My  sister Anna lives in Ghent.")
