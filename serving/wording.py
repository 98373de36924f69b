"""What every answerer shares, so that none imports another: the conversation's messages, an
answer's fixed phrases in the question's language, and a source's text as an answer quotes it."""

from __future__ import annotations

import re

from rag_pipeline.language import detect_language

Message = dict[str, str]  # {"role": "user" | "assistant", "content": ...}

MARKER = re.compile(r"\[(\d+(?:\s*[,，、]\s*\d+)*)\]")

# Fixed phrases of an answer, in the question's language (English for any other), each with
# its language's punctuation (full-width in Chinese).
_PHRASES = {
    "en": {
        "lead": "From the documents:",
        "nothing": "I found nothing in the indexed documents that answers this.",
        "closest": "Nothing here answers this directly. The closest passages:",
        # The closest passages in another language than the question's, which its words miss.
        "in_language": "The closest in {language}: {markers}.",
        "languages": "Chinese English",
        "missing": "{part}: nothing here says.",
        # What was searched: after an answer, and after "nothing" with the filters.
        "searched": "(Searched for: “{query}”)",
        "searched_with": "Searched for: “{query}”, {filters}.",
        "filters": "with filters",
        "no_filters": "with no filters",
    },
    "zh": {
        "lead": "根据文档：",
        "nothing": "在已索引的文档中没有找到能回答这个问题的内容。",
        "closest": "这里没有能直接回答这个问题的内容。最接近的段落：",
        "in_language": "其中{language}段落：{markers}。",
        "languages": "中文 英文",
        "missing": "{part}：文档中没有提到。",
        "searched": "（检索词：“{query}”）",
        "searched_with": "检索词：“{query}”，{filters}。",
        "filters": "筛选条件",
        "no_filters": "未设筛选条件",
    },
}


def language_name(language: str, question: str) -> str:
    """A language's name ("zh" or "en") in the question's language."""
    chinese, english = phrases(question)["languages"].split()
    return chinese if language == "zh" else english


def phrases(question: str) -> dict[str, str]:
    return _PHRASES.get(detect_language(question), _PHRASES["en"])


def quoted(text: str) -> str:
    """A source's text with its own bracketed numbers ("as shown in [2]") in full-width
    brackets, so that only markers an answer adds itself cite passages."""
    return MARKER.sub(lambda match: f"［{match.group(1)}］", text)
