"""Offline evaluation: datasets indexed through the real pipeline, queried through the chat
page's retrieval, scored."""
