import typing
import unittest

from curator_sdk import Filter, InvalidParams, Param
from curator_sdk.params import bind, schema


class Lengths(Filter):
    name = "lengths"
    min_words: int = Param(50, min=0, doc="Fewest words.")
    max_ratio: float = Param(0.5, min=0.0, max=1.0)
    mode: str = Param("words", choices=["words", "chars"])
    lang: typing.Optional[str] = None
    stop: list[str] = Param([], doc="Stop words.")
    needed: int = Param()

    def keep(self, text):
        return True


class ParamsTest(unittest.TestCase):
    def test_schema_has_the_rust_sdks_shape(self):
        s = schema(Lengths)
        self.assertEqual(s["type"], "object")
        self.assertIs(s["additionalProperties"], False)
        self.assertEqual(list(s["properties"]), ["min_words", "max_ratio", "mode", "lang", "stop", "needed"])
        self.assertEqual(s["properties"]["min_words"], {"type": "integer", "minimum": 0, "description": "Fewest words.", "default": 50})
        self.assertEqual(s["properties"]["max_ratio"]["maximum"], 1.0)
        self.assertEqual(s["properties"]["mode"]["enum"], ["words", "chars"])
        self.assertEqual(s["properties"]["stop"]["items"], {"type": "string"})
        self.assertNotIn("default", s["properties"]["lang"])
        self.assertEqual(s["required"], ["needed"])

    def test_bind_fills_defaults_and_names_the_bad_param(self):
        v = bind(Lengths, {"needed": 1, "max_ratio": 1})
        self.assertEqual(v["min_words"], 50)
        self.assertEqual(v["max_ratio"], 1.0)
        self.assertIsNone(v["lang"])
        cases = [
            ({}, "needed: required"),
            ({"needed": 1, "min_words": -1}, "min_words: -1 is below the minimum 0"),
            ({"needed": 1, "min_words": "5"}, "min_words: expected integer, got a string"),
            ({"needed": 1, "min_words": True}, "min_words: expected integer, got a boolean"),
            ({"needed": 1, "mode": "lines"}, "mode: 'lines' is not one of"),
            ({"needed": 1, "stop": ["a", 3]}, "stop[1]: expected string, got a number"),
            ({"needed": 1, "nope": 3}, "nope: unknown param"),
        ]
        for given, message in cases:
            with self.assertRaises(InvalidParams) as e:
                bind(Lengths, given)
            self.assertIn(message, str(e.exception), given)

    def test_from_json_reports_bad_json(self):
        with self.assertRaises(InvalidParams) as e:
            Lengths.from_json("{nope")
        self.assertIn("params: not JSON", str(e.exception))
        self.assertEqual(Lengths.from_json('{"needed": 2}').needed, 2)

    def test_manifest_carries_resources_and_kind(self):
        m = Lengths.manifest()
        self.assertEqual(m["name"], "lengths")
        self.assertEqual(m["kind"], "wasm")
        self.assertEqual(m["resources"], {"cpus": 1.0, "memory_mb": 256})
        self.assertEqual(m["input_columns"], ["text"])

    def test_a_stage_without_a_name_is_refused(self):
        class Nameless(Filter):
            def keep(self, text):
                return True

        with self.assertRaises(TypeError):
            Nameless.manifest()

    def test_an_unsupported_param_type_is_refused(self):
        class Odd(Filter):
            name = "odd"
            when: dict = Param({})

        with self.assertRaises(TypeError):
            schema(Odd)


if __name__ == "__main__":
    unittest.main()
