"""Packaging: the folders at the repository root install as one package, ``pyvta``.

``isa/`` installs as ``pyvta.isa``, ``sim/`` as ``pyvta.sim`` and so on, and ``pyvta/`` (the
command-line tool) is the package itself: nothing else lands at the top of site-packages. The
same mapping serves regular and editable installs, wheels and sdists. Metadata, dependencies and
the ``pyvta`` command are in pyproject.toml.
"""

from setuptools import find_packages, setup

# Folders at the repository root that install as pyvta.<name> (the product's layout).
SUBPACKAGES = ("isa", "sim", "hw", "compiler", "tuner", "driver", "runtime")

PACKAGE_DIR = {"pyvta": "pyvta", **{f"pyvta.{name}": name for name in SUBPACKAGES}}
PACKAGES = [
    sub
    for package, folder in PACKAGE_DIR.items()
    for sub in (package, *(f"{package}.{p}" for p in find_packages(folder)))
]

setup(
    package_dir=PACKAGE_DIR,
    packages=PACKAGES,
    package_data={
        "pyvta.tuner": ["pretuned/*.jsonl", "pretuned/*.network.json"],
        "pyvta.driver": ["*.cpp"],
    },
)
