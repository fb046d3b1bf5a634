"""Ships the Functions library inside the package, with one source of truth.

The Lua source lives once, in the repository's functions/seckill.lua. A
built package (wheel, sdist, a non-editable `pip install`) carries a copy as
seckill/seckill.lua, made here at build time: build_py copies it into the
build tree (not the source tree), sdist into the release tree (so a wheel
built from the sdist finds it there). Nothing is committed twice, so the
copy cannot drift; an editable install has no copy and
seckill.library reads the repository's file. Everything else is in
pyproject.toml."""

import os

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.command.sdist import sdist

HERE = os.path.dirname(os.path.abspath(__file__))
PACKAGED = os.path.join('seckill', 'seckill.lua')
SOURCES = (
    os.path.join(HERE, '..', '..', 'functions', 'seckill.lua'),   # a checkout of the repository
    os.path.join(HERE, PACKAGED),                                  # an unpacked sdist
)


def library_source():
    for path in SOURCES:
        if os.path.exists(path):
            return path
    raise SystemExit('the Functions library is missing: build the package from a checkout of '
                     'redis-seckill (functions/seckill.lua) or from its sdist')


class BuildPy(build_py):
    def run(self):
        super().run()
        if not getattr(self, 'editable_mode', False):
            target = os.path.join(self.build_lib, PACKAGED)
            self.mkpath(os.path.dirname(target))
            self.copy_file(library_source(), target)


class Sdist(sdist):
    def make_release_tree(self, base_dir, files):
        super().make_release_tree(base_dir, files)
        target = os.path.join(base_dir, PACKAGED)
        if os.path.exists(target):     # a hard link to the source tree's copy: replace, not write through
            os.unlink(target)
        self.copy_file(library_source(), target)


setup(cmdclass={'build_py': BuildPy, 'sdist': Sdist})
