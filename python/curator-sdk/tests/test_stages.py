import unittest

from curator_sdk import Batch, Column, Columns, Failed, Filter, Keep, Map, OutOfMemory, Param, Score, Stage


class Words(Filter):
    name = "words"
    min_words: int = Param(2)

    def keep(self, text):
        return len(text.split()) >= self.min_words


class Upper(Map):
    name = "upper"

    def map(self, text):
        return text.upper()


class Length(Score):
    name = "length"
    max_len: int = Param(5)

    def score(self, text):
        return len(text)

    def keep(self, score):
        return score <= self.max_len


class Chars(Stage):
    name = "chars"
    output_columns = ["chars"]

    def process(self, batch):
        return {"chars": [len(t) for t in batch["text"]]}


class Broken(Filter):
    name = "broken"

    def keep(self, text):
        if text == "oom":
            raise MemoryError()
        return {}["missing"]


class StagesTest(unittest.TestCase):
    def batch(self, texts):
        return Batch.of({"id": [str(i) for i in range(len(texts))], "text": texts})

    def test_filter_answers_a_selection(self):
        out = Words().run(self.batch(["a", "a b", "", "a b c"]))
        self.assertIsInstance(out, Keep)
        self.assertEqual(out.rows, [1, 3])

    def test_map_rewrites_text(self):
        self.assertEqual(Upper().run_texts(["ab", "é"]), ["AB", "É"])

    def test_score_follows_nemos_score_filter(self):
        texts = ["abc", "abcdefgh", "ab"]
        self.assertEqual(Length().run(self.batch(texts)).rows, [0, 2])
        self.assertEqual(Length(invert=True).run(self.batch(texts)).rows, [1])
        out = Length(score_field="len").run(self.batch(texts))
        self.assertIsInstance(out, Columns)
        self.assertEqual(out.keep, [0, 2])
        self.assertEqual((out.columns[0].name, out.columns[0].type, out.columns[0].values()), ("len", "float64", [3.0, 8.0, 2.0]))
        out = Length(score_field="len", filter=False).run(self.batch(texts))
        self.assertIsNone(out.keep)

    def test_stage_dict_becomes_columns(self):
        out = Chars().run(self.batch(["héllo", ""]))
        self.assertEqual((out.columns[0].type, out.columns[0].values()), ("int64", [5, 0]))

    def test_errors_are_classed(self):
        with self.assertRaises(Failed) as e:
            Broken().run(self.batch(["x"]))
        self.assertIn("KeyError: 'missing'", str(e.exception))
        self.assertIn("test_stages.py:", str(e.exception))
        with self.assertRaises(OutOfMemory):
            Broken().run(self.batch(["oom"]))


class ColumnsTest(unittest.TestCase):
    def test_round_trips_every_type_with_nulls(self):
        cases = {
            "utf8": ["a", None, "héllo", ""],
            "binary": [b"\x00\xff", None, b""],
            "int64": [1, None, -(2**62)],
            "float64": [0.5, None, -1e300],
            "boolean": [True, False, None, True, True, False, True, False, True],
            "float32-vector": [[0.5, 1.0], None, [2.0, -3.0]],
        }
        for ty, values in cases.items():
            c = Column.of("c", values, ty)
            again = Column(c.name, c.type, c.rows, bytes(c.data), list(c.offsets), bytes(c.validity))
            self.assertEqual(again.values(), values, ty)

    def test_non_ascii_text_is_sliced_by_bytes(self):
        c = Column.of("text", ["日本語", "abc", "Привет"])
        self.assertEqual(Column("text", "utf8", 3, c.data, c.offsets).values(), ["日本語", "abc", "Привет"])

    def test_views_are_rows_of_the_one_buffer(self):
        c = Column.of("text", ["ab", "日本", ""])
        views = c.views()
        self.assertEqual([bytes(v) for v in views], [b"ab", "日本".encode(), b""])
        self.assertIs(views[1].obj, c.data)
        with self.assertRaises(Failed):
            Column.of("n", [1, 2]).views()

    def test_bad_offsets_are_a_clear_error(self):
        with self.assertRaises(Failed) as e:
            Column("text", "utf8", 2, b"abc", [0, 1]).values()
        self.assertIn("column text", str(e.exception))

    def test_a_missing_column_names_those_there(self):
        with self.assertRaises(Failed) as e:
            Batch.of({"text": ["a"]})["lang"]
        self.assertIn("has no column 'lang' (it has text)", str(e.exception))


if __name__ == "__main__":
    unittest.main()
