"""Answering from the index: retrieval (and, in time, rerank, answers, the chat page and API)."""
