"""The semantic tier: facts and preferences of a user, keyed, superseded when they change.

* :mod:`.types`: what an extraction returns (:class:`ExtractedMemory`) and what
  :meth:`~langmem_tiers.TieredMemory.facts` lists (:class:`Fact`);
* :mod:`.keys`: the rules for keys ("home_city"), scoped to the user;
* :mod:`.extract`: the offline extractor, built on :mod:`langmem_tiers.specifics`;
* :mod:`.parse`: robust reading of an LLM's structured extraction;
* :mod:`.supersede`: dedupe and supersession, planned without I/O;
* :mod:`.profile`: which facts ``context()`` delivers, and when history is shown;
* :mod:`.answers`: answer-level recall for the evaluation harness.

Everything here is pure; :mod:`langmem_tiers.memory` runs the I/O.
"""

from langmem_tiers.semantic.types import EXTRACTED_KINDS, ExtractedMemory, Fact, Triple

__all__ = ["EXTRACTED_KINDS", "ExtractedMemory", "Fact", "Triple"]
