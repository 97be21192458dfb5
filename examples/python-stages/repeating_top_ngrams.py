"""NeMo Curator's `RepeatingTopNGramsFilter` (Gopher; nemo_curator/stages/text/filters/
heuristic/repetition/repetition.py, nemo-curator 1.4.0) as a curator stage written in Python:
the share of the document's characters that the most frequent word n-gram accounts for.

One deliberate difference: when several n-grams are equally frequent, NeMo takes whichever
its hash set yields first, which changes with PYTHONHASHSEED (two runs of NeMo can disagree);
this port takes the one that occurs first in the document, so its decisions are reproducible."""

from curator_sdk import Param, Score


class RepeatingTopNGrams(Score):
    """Drops documents in which the most frequent word n-gram makes up more than
    `max_repeating_ngram_ratio` of the characters (NeMo Curator's RepeatingTopNGramsFilter,
    ported to Python)."""

    name = "py_repeating_top_ngrams"
    cpus = 1.0
    memory_mb = 256

    n: int = Param(2, min=1, doc="Words per n-gram.")
    max_repeating_ngram_ratio: float = Param(0.2, min=0.0, max=1.0, doc="Largest share of characters the top n-gram may cover.")

    def score(self, text: str) -> float:
        words = text.strip().split()
        n = self.n
        if len(words) < n:
            return 1.0
        counts = {}
        for gram in zip(*[words[i:] for i in range(n)]):
            counts[gram] = counts.get(gram, 0) + 1
        top = max(counts, key=counts.__getitem__)
        nchar = len(text)
        if nchar == 0:
            return 1.0
        return (nchar - len(text.replace(" ".join(top), ""))) / nchar

    def keep(self, score: float) -> bool:
        return score <= self.max_repeating_ngram_ratio
