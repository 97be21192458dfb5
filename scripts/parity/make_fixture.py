#!/usr/bin/env python3
"""Build tests/parity/fixture.jsonl: the documents the parity references are computed on.

Real text (the quickstart's Python documentation sections and fortunes, every third one),
plus crafted documents that exercise the filters' edge cases: boilerplate and policy text,
bullet lists, URL- and number-heavy text, code, ellipses, parentheses, repeated lines and
paragraphs, long words, whitespace, empty documents and non-English text. Deterministic.
"""
import gzip
import json
import os
import random

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")


def real_docs():
    docs = []
    with open(os.path.join(ROOT, "examples/quickstart/data/docs-000.jsonl"), encoding="utf-8") as f:
        docs += [json.loads(l) for l in f]
    with gzip.open(os.path.join(ROOT, "examples/quickstart/data/docs-001.jsonl.gz"), "rt", encoding="utf-8") as f:
        docs += [json.loads(l) for l in f]
    return [d["text"] for d in docs[::6]]


def crafted(rng):
    out = []
    prose = "The committee met on Tuesday to review the proposal. It was agreed that the plan should go ahead with the changes noted."
    out += ["", " ", "\n\n\n", "word", "a b c", "Hello world.", "\t\t  \n  x  \n\t"]
    out.append("This website uses cookies to improve your experience.\n\nPrivacy Policy | Terms of Use\n\n" + prose)
    out.append(prose + "\n\nLorem ipsum dolor sit amet, consectetur adipiscing elit.")
    out.append("\n\n".join([prose, "Read our privacy policy.", "Cookie policy applies.", "Contact us."]))
    out.append("\n".join("• item number %d in the list" % i for i in range(12)))
    out.append("\n".join(("◦ sub point %d" % i) if i % 3 else "Heading %d" % i for i in range(15)))
    out.append("See https://example.com/a/b?c=d and http://foo.org/x%20y for details. " * 4)
    out.append("https://a.very.long.example.com/path/to/resource?query=1&other=2#frag")
    out.append("Call 555-0199 or 1-800-555-0100; order #12345 ships 2024-01-05, total $1,234.56.")
    out.append(" ".join(str(rng.randint(0, 10**6)) for _ in range(80)))
    out.append("def f(x):\n    return [i * 2 for i in range(x)]\n\n# comment\nclass A:\n    pass\n")
    out.append("function(a, b) { return {x: [a, b], y: (a + b)}; } " * 10)
    out.append("It was late...\nShe waited...\nNothing happened…\nThe end.\nRead more")
    out.append("\n".join(["Click here for more [...]"] * 5 + ["Done."]))
    out.append("The the the the the of of of and and to to that have with be.")
    out.append("THE QUICK BROWN FOX JUMPS OVER THE LAZY DOG AND THE CAT.")
    out.append("#hashtag #another ### ## # word ... … words here " * 3)
    out.append("x" * 1200 + " short words follow here")
    out.append("supercalifragilisticexpialidocious " * 20)
    out.append("a " * 300)
    out.append("\n".join(["Same line repeated here."] * 20))
    out.append("\n\n".join(["Same paragraph repeated.\nWith two lines."] * 8))
    out.append("(((nested))) [brackets] {braces} ⟨angles⟩ " * 15)
    out.append("Der schnelle braune Fuchs springt über den faulen Hund. Die Straße ist nass, und die Kinder spielen im Regen.")
    out.append("Le renard brun rapide saute par-dessus le chien paresseux. C'est une belle journée à Paris, n'est-ce pas ?")
    out.append("El rápido zorro marrón salta sobre el perro perezoso. ¿Dónde está la biblioteca? ¡Qué día tan bonito!")
    out.append("Быстрая коричневая лиса прыгает через ленивую собаку. Сегодня хорошая погода, и мы идём гулять в парк.")
    out.append("素早い茶色の狐がのろまな犬を飛び越える。今日は天気が良いので、公園に散歩に行きます。")
    out.append("敏捷的棕色狐狸跳过了懒狗。今天天气很好，我们去公园散步吧。")
    out.append("빠른 갈색 여우가 게으른 개를 뛰어넘습니다. 오늘은 날씨가 좋아서 공원에 산책하러 갑니다.")
    out.append("الثعلب البني السريع يقفز فوق الكلب الكسول. الطقس جميل اليوم ونحن ذاهبون إلى الحديقة.")
    out.append("तेज़ भूरी लोमड़ी आलसी कुत्ते के ऊपर कूदती है। आज मौसम अच्छा है और हम पार्क में टहलने जा रहे हैं।")
    out.append("Numbers ½ ¾ ² ³ ٣ ٤ ५ ६ and digits 0123456789 mixed with letters ÀÉÎÕÜ ß ø.")
    out.append("Tabs\tand\tnew\nlines\r\nand\x0bvertical\x0cfeeds\x1cand\x1dseparators\u00a0nbsp\u2003em\u3000ideographic")
    out.append("<html><head><title>Page</title></head><body><p>Hi</p></body></html>")
    out.append("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<root><a>1</a></root>")
    # Random word salads of varied lengths and punctuation.
    vocab = "data model the of and to that have with be quality filter web page text corpus , . ! ? ; : - ( ) ... #".split()
    for i in range(50):
        n = rng.randint(1, 400)
        words = [rng.choice(vocab) for _ in range(n)]
        lines = []
        while words:
            k = rng.randint(1, 20)
            lines.append(" ".join(words[:k]))
            words = words[k:]
        sep = "\n\n" if i % 3 == 0 else "\n"
        out.append(sep.join(lines))
    return out


def main():
    rng = random.Random(20261126)
    texts = real_docs() + crafted(rng)
    path = os.path.join(ROOT, "tests/parity/fixture.jsonl")
    with open(path, "w", encoding="utf-8") as f:
        for i, t in enumerate(texts):
            f.write(json.dumps({"id": f"p{i:04}", "text": t}, ensure_ascii=False) + "\n")
    print(f"wrote {len(texts)} documents to {os.path.relpath(path, ROOT)}")


if __name__ == "__main__":
    main()
