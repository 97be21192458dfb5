//! The Python stage `new stage --lang python` writes: a module with one stage class of the
//! Python SDK (`python/curator-sdk`), its unit test (plain `unittest`, run in native CPython),
//! and a README whose first command builds the plugin file with `curator-sdk build`.

use super::{Kind, Project, SAMPLE, Sdk, camel, pipeline_yaml};

pub(super) fn project(name: &str, ident: &str, kind: Kind, sdk: &Sdk) -> Project {
    let ty = camel(ident);
    let build = format!("curator-sdk build {ident}.py -o plugins");
    let artifact = format!("plugins/{ident}.wasm");
    let files = vec![
        (format!("{ident}.py"), module(ident, &ty, kind)),
        (format!("test_{ident}.py"), test(ident, &ty, kind)),
        (".gitignore".to_string(), "/plugins\n/out\n__pycache__/\n".to_string()),
        ("pipeline.yaml".to_string(), pipeline_yaml(ident, kind)),
        ("data/sample.jsonl".to_string(), SAMPLE.to_string()),
        ("README.md".to_string(), readme(name, ident, &build, &artifact, sdk)),
    ];
    Project { files, build, artifact }
}

/// How to install the Python SDK: from the sources this host was built from when they are
/// there, from the same git repository as the Rust SDK, else from the package index.
fn install(sdk: &Sdk) -> String {
    match sdk {
        Sdk::Path(rust_sdk) => match rust_sdk.parent().map(|root| root.join("python/curator-sdk")) {
            Some(p) if p.join("pyproject.toml").exists() => format!("python3 -m pip install {:?}", p.display().to_string()),
            _ => "python3 -m pip install curator-sdk".to_string(),
        },
        Sdk::Git(url) => format!("python3 -m pip install \"curator-sdk @ git+{url}#subdirectory=python/curator-sdk\""),
        Sdk::Version(v) => format!("python3 -m pip install \"curator-sdk=={v}\""),
    }
}

fn module(ident: &str, ty: &str, kind: Kind) -> String {
    let (base, doc, class_extra, params, body) = match kind {
        Kind::Filter => (
            "Filter",
            "Keeps documents with at least `min_words` words.",
            "",
            "    min_words: int = Param(10, min=0, doc=\"Fewest words a kept document may have.\")\n",
            "    def keep(self, text: str) -> bool:\n        return len(text.split()) >= self.min_words\n",
        ),
        Kind::Map => (
            "Map",
            "Collapses runs of whitespace into one space (and trims the ends) when `collapse` is set.",
            "",
            "    collapse: bool = Param(True, doc=\"Collapse whitespace runs.\")\n",
            "    def map(self, text: str) -> str:\n        return \" \".join(text.split()) if self.collapse else text\n",
        ),
        Kind::Score => (
            "Score",
            "Scores each document by its share of uppercase letters and keeps those at or below\n    `max_ratio` (NeMo Curator's ScoreFilter params: `score_field`, `invert`, `filter`).",
            "",
            "    max_ratio: float = Param(0.3, min=0.0, max=1.0, doc=\"Largest share of uppercase letters a kept document may have.\")\n",
            "    def score(self, text: str) -> float:\n        letters = [c for c in text if c.isalpha()]\n        if not letters:\n            return 0.0\n        return sum(c.isupper() for c in letters) / len(letters)\n\n    def keep(self, score: float) -> bool:\n        return score <= self.max_ratio\n",
        ),
        Kind::Stage => (
            "Stage",
            "Adds a column `chars`: each document's length in characters (a general batch stage).",
            "    output_columns = [\"chars\"]\n",
            "    max_chars: int = Param(0, min=0, doc=\"Count at most this many characters of each text (0: all).\")\n",
            "    def process(self, batch: Batch):\n        cap = self.max_chars or None\n        return {\"chars\": [len((t or \"\")[:cap]) for t in batch[\"text\"]]}\n",
        ),
    };
    let imports = if kind == Kind::Stage { format!("Batch, {base}, Param") } else { format!("{base}, Param") };
    format!(
        r#""""`{ident}`: a curator stage written in Python. `curator-sdk build {ident}.py -o plugins`
builds it into one plugin file (a sandboxed WASM component); drop the file into a plugins
directory and name it in a pipeline: `- plugin: {ident}`."""

from curator_sdk import {imports}


class {ty}({base}):
    """{doc}"""

    name = "{ident}"
    cpus = 1.0
    memory_mb = 256
{class_extra}
{params}
{body}"#
    )
}

fn test(ident: &str, ty: &str, kind: Kind) -> String {
    let check = match kind {
        Kind::Filter => {
            format!("self.assertEqual({ty}(min_words=3).run_texts([\"one two\", \"one two three\"]), [\"one two three\"])")
        }
        Kind::Map => format!("self.assertEqual({ty}().run_texts([\"  a \\t b\\n\"]), [\"a b\"])"),
        Kind::Score => {
            format!("self.assertEqual({ty}(max_ratio=0.5).run_texts([\"SHOUTING TEXT\", \"Calm text\"]), [\"Calm text\"])")
        }
        Kind::Stage => format!(
            "out = {ty}().run(Batch.of({{\"id\": [\"a\", \"b\"], \"text\": [\"héllo\", \"\"]}}))\n        self.assertEqual(out.columns[0].values(), [5, 0])"
        ),
    };
    let import = if kind == Kind::Stage { "\nfrom curator_sdk import Batch\n" } else { "" };
    format!(
        r#""""Unit tests of `{ident}`, in native CPython: `python3 -m unittest`."""

import unittest
{import}
from {ident} import {ty}


class Test{ty}(unittest.TestCase):
    def test_works_on_a_few_documents(self):
        {check}

    def test_the_manifest_names_the_stage(self):
        self.assertEqual({ty}.manifest()["name"], "{ident}")


if __name__ == "__main__":
    unittest.main()
"#
    )
}

fn readme(name: &str, ident: &str, build: &str, artifact: &str, sdk: &Sdk) -> String {
    let install = install(sdk);
    format!(
        r#"# {name}

A curator stage written in Python, made with `curator-host new stage --lang python`.

```sh
{install}   # once: the Python SDK and componentize-py
{build} && curator-host run pipeline.yaml --plugins plugins
```

The first command builds `{artifact}`, the one file to ship: a sandboxed WASM component with
CPython inside, initialised at build time, and the stage's manifest. The second runs
`pipeline.yaml` on `data/sample.jsonl` into `out/`. `python3 -m unittest` runs the unit tests
in native CPython (no host needed).

Inside the sandbox the stage sees only the directories its manifest asks for and the pipeline
grants, has no network, and has the memory its manifest declares. Modules it imports are
bundled when they are pure Python (from this folder or the environment's site-packages);
native extensions are not (see the book's chapter "Write a stage in Python").

To use it elsewhere, copy `{artifact}` into a plugins directory and name it in a pipeline
(`- plugin: {ident}`); `--key KEY` on `curator-sdk build` signs it. `curator-host plugin
inspect {artifact}` shows its manifest.
"#
    )
}
