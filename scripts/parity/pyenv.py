"""What the reference scripts share: a pinned venv under target/, and running code in it."""
import os
import subprocess
import venv

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def venv_python(name, pins, probe=None):
    """target/<name>'s python, the venv created and `pins` installed when missing (or when
    `probe`, a Python statement, fails in it)."""
    d = os.path.join(ROOT, "target", name)
    py = os.path.join(d, "bin", "python")
    fresh = not os.path.exists(py)
    if fresh:
        venv.create(d, with_pip=True)
    if fresh or (probe and subprocess.call([py, "-c", probe], stderr=subprocess.DEVNULL) != 0):
        subprocess.check_call([py, "-m", "pip", "install", "--quiet", *pins])
    return py


def run_to_file(py, code, rel_path, *args):
    """Run `code` in `py` with `args`; its stdout becomes the repository file `rel_path`.
    Returns the output."""
    out = subprocess.check_output([py, "-c", code, *args])
    with open(os.path.join(ROOT, rel_path), "wb") as f:
        f.write(out)
    return out
