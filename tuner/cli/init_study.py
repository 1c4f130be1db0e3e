"""``netsim sweep --init-study NAME [--dir experiments]``: lay out a new study.

Writes, from the templates in ``tuner/study_template/`` (every ``__STUDY__`` replaced by NAME),
the conventions of the sweep-driven studies: ``DIR/NAME/`` with ``run.py`` (small grid by
default, ``--full``), ``study.py`` (the sweep point), ``grid.yaml`` and ``grid_full.yaml``
(sweep specs), ``render.py`` and ``README.md`` (claim, method, result between render markers,
what it does not show); ``DIR/notebooks/NAME.ipynb``; and ``tests/experiments/test_NAME.py``
beside DIR (in the folder that holds DIR). The study runs and its test passes as laid out.
"""

from __future__ import annotations

import keyword
import re
from pathlib import Path

TEMPLATES = Path(__file__).resolve().parents[1] / "study_template"
TOKEN = "__STUDY__"
_NAME = re.compile(r"[a-z][a-z0-9_]*")
#: template file -> path of the laid-out file relative to DIR (NAME filled in)
LAYOUT = {"study.py.tmpl": "NAME/study.py", "run.py.tmpl": "NAME/run.py",
          "render.py.tmpl": "NAME/render.py", "grid.yaml.tmpl": "NAME/grid.yaml",
          "grid_full.yaml.tmpl": "NAME/grid_full.yaml", "README.md.tmpl": "NAME/README.md",
          "notebook.ipynb.tmpl": "notebooks/NAME.ipynb",
          "test.py.tmpl": "../tests/experiments/test_NAME.py"}


def check_name(name: str) -> str:
    """NAME must be a lower-case Python identifier (it is the study's package name)."""
    if not _NAME.fullmatch(name) or keyword.iskeyword(name):
        raise ValueError(f"--init-study {name!r}: a study name is a lower-case Python "
                         "identifier (letters, digits, _; starting with a letter), e.g. "
                         "my_study")
    return name


def planned(name: str, root: Path) -> dict[Path, str]:
    """Every file to write (path -> template name), the package's ``__init__.py`` included."""
    files = {(root / name / "__init__.py").resolve(): ""}
    for template, rel in LAYOUT.items():
        files[(root / rel.replace("NAME", name)).resolve()] = template
    return files


def init_study(name: str, root: Path) -> list[Path]:
    """Lay out study ``name`` under the experiments folder ``root``; refuse a name whose
    folder, notebook or test exists. Returns the files written."""
    files = planned(check_name(name), Path(root))
    taken = [p for p in (Path(root) / name, *files) if p.exists()]
    if taken:
        raise FileExistsError(f"--init-study {name}: {taken[0]} exists; choose another name")
    for path, template in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        text = (TEMPLATES / template).read_text() if template else ""
        path.write_text(text.replace(TOKEN, name))
    return list(files)
