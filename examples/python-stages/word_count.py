"""NeMo Curator's `WordCountFilter` (nemo_curator/stages/text/filters/heuristic/string.py,
nemo-curator 1.4.0) as a curator stage written in Python: the same score (the number of
whitespace-separated words of the stripped text), the same keep rule and defaults.

NeMo splits Chinese with jieba and Japanese with MeCab; MeCab is a native extension, which a
WASM component cannot load, so this port splits on whitespace in every language (curator's
own `word_count_filter` segments CJK text natively)."""

from curator_sdk import Param, Score


class WordCount(Score):
    """Keeps documents with between `min_words` and `max_words` words (NeMo Curator's
    WordCountFilter, ported to Python)."""

    name = "py_word_count"
    cpus = 1.0
    memory_mb = 256

    min_words: int = Param(50, min=0, doc="Fewest words a kept document may have.")
    max_words: int = Param(100000, min=0, doc="Most words a kept document may have.")

    def score(self, text: str) -> float:
        return len(text.strip().split())

    def keep(self, score: float) -> bool:
        return self.min_words <= score <= self.max_words
