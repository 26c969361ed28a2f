"""Builds the keywatch Python package's native part with the project's CMake: the
extension keywatch._keywatch and libkeywatch.so.<major> beside it (rpath $ORIGIN).

The CMake build folder is build/python-<python tag> (reused, so a second `pip install` is
quick); CMAKE_BUILD_PARALLEL_LEVEL sets the build's jobs (default 2) and ccache is used when
installed (CCACHE_DIR as set in the environment)."""

import os
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent


def version() -> str:
    text = (ROOT / "include" / "keywatch_types.h").read_text()
    return re.search(r'#define KW_VERSION_STRING "([0-9.]+)"', text).group(1)


class CMakeBuild(build_ext):
    def build_extension(self, ext: Extension) -> None:
        tag = sysconfig.get_config_var("SOABI") or f"py{sys.version_info[0]}{sys.version_info[1]}"
        build = ROOT / "build" / f"python-{tag}"
        configure = [
            "cmake", "-S", str(ROOT), "-B", str(build), "-DCMAKE_BUILD_TYPE=Release",
            "-DKW_BUILD_PYTHON=ON", "-DKW_BUILD_CLI=OFF", "-DKW_BUILD_TESTS=OFF",
            "-DKW_BUILD_BENCH=OFF", "-DKW_BUILD_EXAMPLES=OFF",
            f"-DPython3_EXECUTABLE={sys.executable}",
        ]
        if shutil.which("ccache"):
            configure += ["-DCMAKE_C_COMPILER_LAUNCHER=ccache",
                          "-DCMAKE_CXX_COMPILER_LAUNCHER=ccache"]
        jobs = os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL", "2")
        subprocess.run(configure, check=True)
        subprocess.run(["cmake", "--build", str(build), "-j", jobs, "--target",
                        "keywatch_python"], check=True)
        built = build / "python" / "keywatch"
        target = Path(self.get_ext_fullpath(ext.name)).parent
        target.mkdir(parents=True, exist_ok=True)
        for item in built.iterdir():
            if item.name.startswith(("_keywatch", "libkeywatch")):
                shutil.copy2(item, target / item.name)


setup(
    version=version(),
    ext_modules=[Extension("keywatch._keywatch", sources=[])],
    cmdclass={"build_ext": CMakeBuild},
    zip_safe=False,
)
