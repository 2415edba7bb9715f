"""Framework baselines (LangChain, LlamaIndex) for the evaluation harness.

These modules import their frameworks at import time; the harness imports them only
when such a retriever is asked for, so ``import langmem_tiers`` never pulls them in.
"""
