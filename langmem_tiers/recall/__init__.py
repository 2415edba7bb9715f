"""Episodic recall: the vector store wrapper and the rank-fusion maths."""
