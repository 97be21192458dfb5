"""The Pipeline API without a real host: a stand-in `curator-host` that records the file it was
given and writes a summary (the real one runs in tests/e2e/python_stages.rs)."""

import json
import os
import stat
import tempfile
import unittest
from pathlib import Path

from curator import Pipeline, PipelineError

FAKE_HOST = r"""#!/usr/bin/env python3
import json, os, sys
from pathlib import Path
args = sys.argv[1:]
pipeline = Path(args[1])
Path(os.environ["SEEN"]).write_text(json.dumps({"args": args, "text": pipeline.read_text(), "folder": str(pipeline.parent)}))
if "refuse" in pipeline.read_text():
    print("error: pipeline.yaml: stages[0].params.refuse: unknown parameter", file=sys.stderr)
    sys.exit(2)
if args[0] == "run" and "--dry-run" not in args:
    out = pipeline.parent / "out"
    out.mkdir(exist_ok=True)
    (out / "_summary.json").write_text(json.dumps({"docs_in": 3, "docs_out": 2, "stages": [{"label": "f"}], "outputs": [{"path": "a.jsonl"}]}))
"""


class PipelineTest(unittest.TestCase):
    def setUp(self):
        self.tmp = Path(tempfile.mkdtemp())
        host = self.tmp / "curator-host"
        host.write_text(FAKE_HOST)
        host.chmod(host.stat().st_mode | stat.S_IEXEC)
        self.host = str(host)
        self.seen = self.tmp / "seen.json"
        os.environ["SEEN"] = str(self.seen)

    def test_yaml_round_trip_keeps_order_and_quotes_what_yaml_11_would_misread(self):
        p = Pipeline(name="q", source="data", sink="y", batch_size=256, execution={"ignore_failures": True})
        p.stage("word_count_filter", min_words=50, mode="on", options={"name": "min-50", "resources": {"cpus": 2}})
        text = p.to_yaml()
        self.assertLess(text.index("source:"), text.index("stages:"))
        self.assertLess(text.index("stages:"), text.index("sink:"))
        self.assertIn('path: "y"', text)
        self.assertIn('mode: "on"', text)
        self.assertEqual(Pipeline.from_yaml(text), p)
        self.assertEqual(p.to_dict()["stages"][0], {"plugin": "word_count_filter", "name": "min-50", "params": {"min_words": 50, "mode": "on"}, "resources": {"cpus": 2}})

    def test_run_gives_the_host_a_copy_beside_the_loaded_file_and_reads_the_report(self):
        folder = self.tmp / "job"
        folder.mkdir()
        original = "# my comments\nsource: {path: data}\nstages:\n  - plugin: f\nsink: {path: out}\n"
        (folder / "pipeline.yaml").write_text(original)
        p = Pipeline.from_yaml(folder / "pipeline.yaml")
        report = p.run(plugins=["plugins"], workers=2, host=self.host, quiet=True)
        seen = json.loads(self.seen.read_text())
        self.assertEqual(seen["folder"], str(folder))
        self.assertEqual(seen["args"][2:], ["--plugins", "plugins", "--workers", "2"])
        self.assertEqual(Pipeline.from_yaml(seen["text"]), p)
        self.assertEqual((folder / "pipeline.yaml").read_text(), original, "the user's file is not rewritten")
        self.assertFalse([f for f in folder.iterdir() if f.name.startswith(".curator-pipeline-")], "the temporary copy is removed")
        self.assertEqual((report.docs_in, report.docs_out, report.files), (3, 2, [folder / "out" / "a.jsonl"]))

    def test_a_refusal_raises_with_the_hosts_message_and_code(self):
        p = Pipeline(source="data", sink="out").stage("f", refuse=1)
        cwd = os.getcwd()
        os.chdir(self.tmp)
        try:
            with self.assertRaises(PipelineError) as e:
                p.validate(host=self.host)
        finally:
            os.chdir(cwd)
        self.assertEqual(e.exception.code, 2)
        self.assertIn("stages[0].params.refuse: unknown parameter", str(e.exception))
        self.assertIn("--dry-run", json.loads(self.seen.read_text())["args"])

    def test_bad_arguments_are_refused_before_any_host_runs(self):
        with self.assertRaises(TypeError):
            Pipeline(source=3)
        with self.assertRaises(TypeError):
            Pipeline(stages=[42])


if __name__ == "__main__":
    unittest.main()
